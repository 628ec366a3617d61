#include "varstate/logging.h"

#include <cstdlib>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "base/logging.h"
#include "varstate/error.h"

namespace varstate {
namespace {

spdlog::level::level_enum parse_level(std::string_view name) {
  auto level = spdlog::level::from_str(std::string(name));
  // from_str maps unknown names to "off"; only accept "off" when asked for.
  if (level == spdlog::level::off && name != "off") {
    throw InvalidArgumentError("unknown log level " + quoted(name) +
                               " (expected trace, debug, info, warn, error, critical or off)");
  }
  return level;
}

std::shared_ptr<spdlog::logger> make_logger() {
  auto log = spdlog::stderr_color_mt("varstate");
  log->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [varstate] [%l] %v");
  auto level = spdlog::level::warn;
  if (const char* env = std::getenv("VARSTATE_LOG_LEVEL"); env && *env) {
    try {
      level = parse_level(env);
    } catch (const InvalidArgumentError& e) {
      log->warn("ignoring VARSTATE_LOG_LEVEL: {}", e.what());
    }
  }
  log->set_level(level);
  return log;
}

}  // namespace

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = make_logger();
  return *instance;
}

void set_log_level(std::string_view level) { logger().set_level(parse_level(level)); }

}  // namespace varstate

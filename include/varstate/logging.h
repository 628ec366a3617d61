// Logging control. varstate logs through spdlog; the level comes from the
// environment variable VARSTATE_LOG_LEVEL (trace, debug, info, warn, error,
// critical, off; default warn) and can be changed at run time.
#pragma once

#include <string_view>

namespace varstate {

// Sets the log level by name; throws InvalidArgumentError for an unknown name.
void set_log_level(std::string_view level);

}  // namespace varstate

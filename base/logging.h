// The library's logger (spdlog). Internal: public headers never include it.
#pragma once

#include <spdlog/spdlog.h>

namespace varstate {

// The "varstate" logger, writing to stderr, created on first use with the
// level from VARSTATE_LOG_LEVEL. Thread-safe.
spdlog::logger& logger();

}  // namespace varstate

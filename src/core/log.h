// Logging: a sink (callback or stderr) plus a level. Each engine owns a
// Logger built from its options; library code without an engine uses
// Logger::global(). A logger without its own callback sends its messages to
// the library-wide sink when one is set (ds_set_log_callback), else stderr.
#pragma once

#include <string>

#include "deepspeed_c.h"

namespace ds {

class Logger {
public:
    // level DS_UNSET_I32: from the DS_LOG_LEVEL environment variable
    // (a number 0-4 or off/error/warn/info/debug), else DS_LOG_WARN.
    Logger(ds_log_fn fn = nullptr, void* user = nullptr, int32_t level = DS_UNSET_I32,
           int32_t rank = 0);

    bool enabled(int32_t level) const { return level <= level_ && level_ > DS_LOG_OFF; }
    void log(int32_t level, const std::string& message) const;
    void set_rank(int32_t rank) { rank_ = rank; }
    int32_t level() const { return level_; }

    static const Logger& global();
    // The library-wide sink (ds_set_log_callback): messages of loggers without
    // their own callback go there when it is set; fn NULL restores stderr.
    static void set_global_sink(ds_log_fn fn, void* user);
    // The level DS_LOG_LEVEL asks for, or DS_LOG_WARN.
    static int32_t level_from_env();

private:
    ds_log_fn fn_;
    void* user_;
    int32_t level_;
    int32_t rank_;
};

}  // namespace ds

#define DS_LOG(logger, lvl, ...)                                         \
    do {                                                                 \
        if ((logger).enabled(lvl)) (logger).log((lvl), ::ds::format(__VA_ARGS__)); \
    } while (0)

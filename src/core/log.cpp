#include "core/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <strings.h>

#include "core/error.h"

namespace ds {

namespace {
// The library-wide sink. A mutex keeps fn and user together; the callback is
// called after the lock is dropped, so it may log or reset the sink itself.
struct GlobalSink {
    std::mutex mu;
    ds_log_fn fn = nullptr;
    void* user = nullptr;
};
GlobalSink& global_sink() {
    static auto* s = new GlobalSink();  // never destroyed: usable during exit
    return *s;
}
}  // namespace

void Logger::set_global_sink(ds_log_fn fn, void* user) {
    GlobalSink& g = global_sink();
    std::lock_guard<std::mutex> lock(g.mu);
    g.fn = fn;
    g.user = fn ? user : nullptr;
}

int32_t Logger::level_from_env() {
    const char* s = std::getenv("DS_LOG_LEVEL");
    if (!s || !*s) return DS_LOG_WARN;
    static const char* names[] = {"off", "error", "warn", "info", "debug"};
    for (int i = 0; i < 5; ++i)
        if (strcasecmp(s, names[i]) == 0) return i;
    if (strcasecmp(s, "warning") == 0) return DS_LOG_WARN;
    char* end = nullptr;
    long v = std::strtol(s, &end, 10);
    if (end && *end == '\0' && v >= 0) return v > DS_LOG_DEBUG ? DS_LOG_DEBUG : static_cast<int32_t>(v);
    return DS_LOG_WARN;
}

Logger::Logger(ds_log_fn fn, void* user, int32_t level, int32_t rank)
    : fn_(fn), user_(user), level_(level == DS_UNSET_I32 ? level_from_env() : level), rank_(rank) {}

void Logger::log(int32_t level, const std::string& message) const {
    if (!enabled(level)) return;
    if (fn_) {
        fn_(level, message.c_str(), user_);
        return;
    }
    ds_log_fn gfn;
    void* guser;
    {
        GlobalSink& g = global_sink();
        std::lock_guard<std::mutex> lock(g.mu);
        gfn = g.fn;
        guser = g.user;
    }
    if (gfn) {
        gfn(level, message.c_str(), guser);
        return;
    }
    if (rank_ != 0) return;  // stderr default: rank 0 only, as DeepSpeed
    static const char* tags[] = {"", "ERROR", "WARN", "INFO", "DEBUG"};
    std::fprintf(stderr, "[deepspeed_c %s] %s\n", tags[level < 0 || level > 4 ? 0 : level],
                 message.c_str());
}

const Logger& Logger::global() {
    static const Logger g;
    return g;
}

}  // namespace ds

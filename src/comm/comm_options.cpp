// Names of ops and backends, and communicator options from the environment.
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "comm/communicator.h"

namespace ds::comm {

const char* op_name(Op op) {
    switch (op) {
        case Op::Sum: return "sum";
        case Op::Avg: return "avg";
        case Op::Max: return "max";
    }
    return "unknown_op";
}

const char* backend_name(Backend b) {
    switch (b) {
        case Backend::Auto: return "auto";
        case Backend::Local: return "local";
        case Backend::Mpi: return "mpi";
        case Backend::Nccl: return "nccl";
    }
    return "unknown_backend";
}

Options options_from_env() {
    Options o;
    if (const char* v = std::getenv("DS_COMM_TIMEOUT_MS"); v && *v) {
        errno = 0;
        char* end = nullptr;
        const long long ms = std::strtoll(v, &end, 10);
        DS_CHECK(errno == 0 && end != v && *end == '\0' && ms > 0, DS_ERR_INVALID_ARGUMENT,
                 "environment variable DS_COMM_TIMEOUT_MS='%s' is not a positive integer (milliseconds)", v);
        o.timeout_ms = ms;
    }
    if (const char* v = std::getenv("DS_COMM_DEBUG"); v && *v) {
        DS_CHECK(std::strcmp(v, "0") == 0 || std::strcmp(v, "1") == 0, DS_ERR_INVALID_ARGUMENT,
                 "environment variable DS_COMM_DEBUG='%s' must be 0 or 1", v);
        o.debug = v[0] == '1';
    }
    return o;
}

}  // namespace ds::comm

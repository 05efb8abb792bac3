// The local backend: a world of one. Every collective's result is this
// rank's own data, so each is a copy (or nothing, in place) and completes
// before it returns; there is nothing to time out and no watchdog.
#include <cstring>

#include "comm/factory.h"

namespace ds::comm {

namespace {

class LocalComm final : public Communicator {
public:
    explicit LocalComm(const Options& options) : Communicator(options) {}

    int rank() const override { return 0; }
    int size() const override { return 1; }
    Backend backend() const override { return Backend::Local; }

protected:
    static std::unique_ptr<Request> copy(const void* src, void* dst, size_t count, DType dtype) {
        // The sum, mean or max over one rank is the value itself (x / 1 == x exactly).
        if (src != dst && count > 0) std::memmove(dst, src, count * dtype_size(dtype));
        return completed();
    }

    std::unique_ptr<Request> start_allreduce(const void* send, void* recv, size_t count, DType dtype, Op,
                                             const Fingerprint&) override {
        return copy(send, recv, count, dtype);
    }
    std::unique_ptr<Request> start_reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                                                  Op, const Fingerprint&) override {
        return copy(send, recv, count, dtype);
    }
    std::unique_ptr<Request> start_allgather(const void* send, void* recv, size_t count, DType dtype,
                                             const Fingerprint&) override {
        return copy(send, recv, count, dtype);
    }
    std::unique_ptr<Request> start_broadcast(void*, size_t, DType, int, const Fingerprint&) override {
        return completed();
    }
    std::unique_ptr<Request> start_alltoall(const void* send, void* recv, size_t count, DType dtype,
                                            const Fingerprint&) override {
        return copy(send, recv, count, dtype);
    }
    std::unique_ptr<Request> start_barrier(const Fingerprint&) override { return completed(); }
    // The only rank forms a new world of one, unless its color is undefined.
    std::shared_ptr<Communicator> split_backend(int color, int) override {
        if (color < 0) return nullptr;
        return std::make_shared<LocalComm>(options());
    }
    // A world of one has no peer: the base class rejects every peer first.
    std::unique_ptr<Request> start_send(const void*, size_t, DType, int peer, int, const Fingerprint&) override {
        fail_no_peer(peer);
    }
    std::unique_ptr<Request> start_recv(void*, size_t, DType, int peer, int, const Fingerprint&) override {
        fail_no_peer(peer);
    }

private:
    [[noreturn]] static void fail_no_peer(int peer) {
        ::ds::fail(DS_ERR_INVALID_ARGUMENT, "peer %d: a world of one has no other rank", peer);
    }
};

}  // namespace

std::shared_ptr<Communicator> make_local(const Options& options) {
    return std::make_shared<LocalComm>(options);
}

}  // namespace ds::comm

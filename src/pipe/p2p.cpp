#include "pipe/p2p.h"

#include <cstring>
#include <string>
#include <vector>

#include "comm/tensor_collectives.h"
#include "core/dlpack_interop.h"
#include "core/error.h"

namespace ds::pipe {

namespace {

constexpr int64_t kMagic = 0x3250504944;  // "DIPP2": a ds_pipe_send header
constexpr size_t kFixed = 4;              // magic, dtype, ndim, nbytes; then the shape
constexpr size_t kHeaderWords = kFixed + kMaxTensorDims;

std::vector<int64_t> header_of(const Tensor& t) {
    std::vector<int64_t> h(kHeaderWords, 0);
    h[0] = kMagic;
    h[1] = static_cast<int64_t>(t.dtype());
    h[2] = t.dim();
    h[3] = static_cast<int64_t>(t.nbytes());
    for (int64_t i = 0; i < t.dim(); ++i) h[kFixed + static_cast<size_t>(i)] = t.shape()[static_cast<size_t>(i)];
    return h;
}

std::string describe(int64_t dtype, int64_t ndim, const int64_t* shape) {
    const bool known = dtype >= 0 && dtype <= static_cast<int64_t>(DType::I64);
    std::string s = known ? dtype_name(static_cast<DType>(dtype)) : "dtype " + std::to_string(dtype);
    s += " [";
    for (int64_t i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

}  // namespace

void send_tensor(comm::Communicator& c, const Tensor& t, int peer, int tag) {
    comm::check_host_tensor(c, t, "ds_pipe_send: tensor");
    const std::vector<int64_t> h = header_of(t);
    c.send(h.data(), h.size(), DType::I64, peer, tag);
    c.send(t.data_ptr(), t.nbytes(), DType::U8, peer, tag);
}

void recv_tensor(comm::Communicator& c, const Tensor& t, int peer, int tag) {
    comm::check_host_tensor(c, t, "ds_pipe_recv: tensor");
    std::vector<int64_t> h(kHeaderWords, 0);
    c.recv(h.data(), h.size(), DType::I64, peer, tag);
    DS_CHECK(h[0] == kMagic && h[2] >= 0 && h[2] <= kMaxTensorDims && h[3] >= 0, DS_ERR_COMM,
             "the message from rank %d (tag %d) is not a ds_pipe_send header", peer, tag);
    const std::vector<int64_t> mine = header_of(t);
    const bool same = std::memcmp(h.data(), mine.data(), h.size() * sizeof(int64_t)) == 0;
    if (same) {
        c.recv(t.data_ptr(), t.nbytes(), DType::U8, peer, tag);
        return;
    }
    std::vector<uint8_t> scratch(static_cast<size_t>(h[3]));  // keeps the stream aligned
    c.recv(scratch.data(), scratch.size(), DType::U8, peer, tag);
    ::ds::fail(DS_ERR_INVALID_ARGUMENT,
               "rank %d sent %s (tag %d), but the receiving tensor is %s (the message was consumed)",
               peer, describe(h[1], h[2], &h[kFixed]).c_str(), tag,
               describe(mine[1], mine[2], &mine[kFixed]).c_str());
}

}  // namespace ds::pipe

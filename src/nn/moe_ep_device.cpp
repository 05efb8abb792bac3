// Expert parallelism of the MoE layer on a device (nn/moe_ep.h for the
// layouts and the exchange; moe_ep.cpp is the CPU path). The same exchange
// with the blocks in device memory:
//   dispatch: one row gather packs this rank's kept routes' tokens into the
//             [E, rows, C] blocks (a route's row is expert * rows + slot;
//             the padding rows copy token 0 and are never read);
//   experts:  a local expert's input rows are gathered from the received
//             blocks, its output rows scatter-added into zeroed blocks;
//   combine:  the returned rows of the routes with top-k index j (at most one
//             per token) gathered and added, times their weights, into the
//             tokens' rows: j = 0 first, as the CPU path's route order adds.
// The blocks go over ep_.device (NCCL on a GPU); the route counts over the
// host communicator. The arithmetic is the CPU path's operation for
// operation (a padding or placement row is copied, never summed), so on the
// host-backed device the two agree bit for bit
// (tests/mpi/test_moe_ep_on_device.cpp).
#include <vector>

#include "core/error.h"
#include "core/tensor_transfer.h"
#include "nn/block_util.h"
#include "nn/layer_util.h"
#include "nn/moe_layer.h"

namespace ds::nn {

namespace {

template <class T>
Tensor to_run_device(std::vector<T>& v, DType dtype, RunContext& ctx) {
    return on_run_device(Tensor::borrow(v.data(), {static_cast<int64_t>(v.size())}, {}, dtype, Device::cpu()), ctx);
}

Tensor device_blocks(int64_t rows, int64_t C, bool zeroed, RunContext& ctx) {
    return zeroed ? Tensor::zeros({rows, C}, DType::F32, ctx.device, run_allocator(ctx), MemCategory::Buffers)
                  : Tensor::empty({rows, C}, DType::F32, ctx.device, run_allocator(ctx), MemCategory::Buffers);
}

// Block p of `send` to rank p, block q of the result from rank q, in device memory.
Tensor exchange_on_device(const EpGroup& g, const Tensor& send, RunContext& ctx) {
    Tensor recv = device_blocks(send.shape()[0], send.shape()[1], /*zeroed=*/false, ctx);
    g.device->alltoall(send.data<float>(), recv.data<float>(), static_cast<size_t>(send.numel() / g.size),
                       DType::F32);
    return recv;
}

}  // namespace

Tensor MoeLayer::local_expert_rows(int64_t l, RunContext& ctx) const {
    const int64_t E = cfg_.num_experts, P = ep_.size, El = E / P;
    std::vector<int32_t> rows;
    for (int64_t q = 0; q < P; ++q) {
        const int64_t n = ep_counts_[static_cast<size_t>(q * E + first_expert_ + l)];
        for (int64_t j = 0; j < n; ++j) rows.push_back(static_cast<int32_t>((q * El + l) * ep_rows_ + j));
    }
    return rows.empty() ? Tensor() : to_run_device(rows, DType::I32, ctx);
}

void MoeLayer::run_local_experts_on_device(const Tensor& in, const Tensor& out, bool backward, RunContext& ctx) {
    const int64_t C = hidden_, B = in.shape()[0], El = cfg_.num_experts / ep_.size;
    const Kernels& kn = ctx.kernels;
    for (int64_t l = 0; l < El; ++l) {
        const Tensor idx = local_expert_rows(l, ctx);
        if (!idx.defined()) continue;  // no rank sent this expert a token
        const int64_t n = idx.numel();
        Tensor xe = new_activation({n, C}, ctx);
        kn.moe_rows_gather(in.data<float>(), B, C, idx.data<int32_t>(), nullptr, n, xe.data<float>());
        Mlp& expert = *experts_[static_cast<size_t>(l)];
        const Tensor ye = backward ? expert.backward(xe, ctx) : call_forward(expert, xe, ctx);
        kn.moe_rows_scatter_add(ye.data<float>(), n, C, idx.data<int32_t>(), nullptr, B, out.data<float>());
    }
}

void MoeLayer::add_returned_rows_on_device(const Tensor& blocks, bool weighted, const Tensor& dst,
                                           RunContext& ctx) const {
    const int64_t C = hidden_, B = blocks.shape()[0], S = dst.shape()[0];
    for (size_t j = 0; j + 1 < ep_j_start_.size(); ++j) {
        const int64_t first = ep_j_start_[j], n = ep_j_start_[j + 1] - first;
        if (n == 0) continue;
        Tensor rows = new_activation({n, C}, ctx);
        ctx.kernels.moe_rows_gather(blocks.data<float>(), B, C, ep_pos_.data<int32_t>() + first, nullptr, n,
                                    rows.data<float>());
        ctx.kernels.moe_rows_scatter_add(rows.data<float>(), n, C, ep_token_.data<int32_t>() + first,
                                         weighted ? ep_weight_.data<float>() + first : nullptr, S, dst.data<float>());
    }
}

void MoeLayer::forward_experts_ep_on_device(const Tensor& x2, const Tensor& y, RunContext& ctx) {
    // The engine that shards the layers on a device gives them one (create_ep_engine).
    DS_CHECK(ep_.device != nullptr, DS_ERR_INTERNAL,
             "MoE%s: expert parallelism on %s without a communicator for device buffers over the expert group",
             module_label(*this).c_str(), ctx.device.str().c_str());
    const int64_t C = hidden_, S = x2.shape()[0], E = cfg_.num_experts;
    const size_t k = static_cast<size_t>(cfg_.k);
    gather_route_counts();
    if (ep_rows_ == 0) return;  // no rank kept a route: nothing to exchange (all ranks agree)
    const int64_t rows = ep_rows_, B = E * rows;
    const Kernels& kn = ctx.kernels;

    // The kept routes grouped by top-k index, and the packing map of the blocks.
    std::vector<int32_t> token, pos, send_rows(static_cast<size_t>(B), 0);
    std::vector<float> weight;
    ep_route_.clear();
    ep_j_start_.assign(k + 1, 0);
    for (size_t j = 0; j < k; ++j) {
        for (size_t r = j; r < slot_.size(); r += k) {
            if (slot_[r] < 0) continue;
            const int64_t at = expert_[r] * rows + slot_[r];
            ep_route_.push_back(r);
            token.push_back(static_cast<int32_t>(r / k));
            pos.push_back(static_cast<int32_t>(at));
            weight.push_back(weight_[r]);
            send_rows[static_cast<size_t>(at)] = static_cast<int32_t>(r / k);
        }
        ep_j_start_[j + 1] = static_cast<int64_t>(ep_route_.size());
    }
    ep_token_ = token.empty() ? Tensor() : to_run_device(token, DType::I32, ctx);
    ep_pos_ = pos.empty() ? Tensor() : to_run_device(pos, DType::I32, ctx);
    ep_weight_ = weight.empty() ? Tensor() : to_run_device(weight, DType::F32, ctx);

    Tensor send = device_blocks(B, C, /*zeroed=*/false, ctx);
    const Tensor send_idx = to_run_device(send_rows, DType::I32, ctx);
    kn.moe_rows_gather(x2.data<float>(), S, C, send_idx.data<int32_t>(), nullptr, B, send.data<float>());
    const Tensor recv = exchange_on_device(ep_, send, ctx);

    Tensor back = device_blocks(B, C, /*zeroed=*/true, ctx);
    run_local_experts_on_device(recv, back, /*backward=*/false, ctx);
    const Tensor ret = exchange_on_device(ep_, back, ctx);
    add_returned_rows_on_device(ret, /*weighted=*/true, y, ctx);
    if (ctx.training) ep_returned_.keep(ret, ctx);
}

void MoeLayer::backward_experts_ep_on_device(const Tensor& dy, const Tensor& dx, std::vector<float>& dweight,
                                             RunContext& ctx) {
    if (ep_rows_ == 0) return;  // as in forward: no route anywhere
    const int64_t C = hidden_, S = dy.shape()[0], E = cfg_.num_experts, B = E * ep_rows_;
    const int64_t kept = static_cast<int64_t>(ep_route_.size());
    const Kernels& kn = ctx.kernels;
    const Tensor& ret = ep_returned_.get();

    // Combine's backward on the token side: d weight of a route = <dy[token],
    // its returned row>; d returned row = weight * dy[token], packed into the
    // blocks (padding rows: token 0 times 0, never read).
    Tensor dsend = device_blocks(B, C, /*zeroed=*/false, ctx);
    {
        std::vector<int32_t> rows(static_cast<size_t>(B), 0);
        std::vector<float> scale(static_cast<size_t>(B), 0.0f);
        for (size_t i = 0; i < ep_route_.size(); ++i) {
            const size_t r = ep_route_[i];
            const int64_t at = expert_[r] * ep_rows_ + slot_[r];
            rows[static_cast<size_t>(at)] = static_cast<int32_t>(r / static_cast<size_t>(cfg_.k));
            scale[static_cast<size_t>(at)] = weight_[r];
        }
        const Tensor idx = to_run_device(rows, DType::I32, ctx), sc = to_run_device(scale, DType::F32, ctx);
        kn.moe_rows_gather(dy.data<float>(), S, C, idx.data<int32_t>(), sc.data<float>(), B, dsend.data<float>());
    }
    if (kept > 0) {
        Tensor out = new_activation({kept, C}, ctx);
        kn.moe_rows_gather(ret.data<float>(), B, C, ep_pos_.data<int32_t>(), nullptr, kept, out.data<float>());
        Tensor dw = Tensor::empty({kept}, DType::F32, ctx.device, run_allocator(ctx), MemCategory::Buffers);
        kn.moe_rows_dot(dy.data<float>(), S, C, ep_token_.data<int32_t>(), out.data<float>(), kept, dw.data<float>());
        const Tensor dwh = copy_to_device(dw, Device::cpu(), run_allocator(ctx));
        for (size_t i = 0; i < ep_route_.size(); ++i) dweight[ep_route_[i]] = dwh.data<float>()[i];
    }
    const Tensor drecv = exchange_on_device(ep_, dsend, ctx);

    Tensor dback = device_blocks(B, C, /*zeroed=*/true, ctx);
    run_local_experts_on_device(drecv, dback, /*backward=*/true, ctx);
    const Tensor dret = exchange_on_device(ep_, dback, ctx);
    add_returned_rows_on_device(dret, /*weighted=*/false, dx, ctx);  // each route's input gradient, j = 0 first
}

}  // namespace ds::nn

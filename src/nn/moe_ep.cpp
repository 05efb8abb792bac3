#include "nn/moe_ep.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

#include "core/error.h"
#include "nn/block_util.h"

namespace ds::nn {

namespace {

Tensor zeros_buffer(const Shape& s, RunContext& ctx) {
    return Tensor::zeros(s, DType::F32, Device::cpu(), ctx.alloc != nullptr ? *ctx.alloc : Allocator::process(),
                         MemCategory::Buffers);
}

// Block j of `send` to rank j, block i of the result from rank i (same shape).
Tensor exchange(const EpGroup& g, const Tensor& send, RunContext& ctx) {
    Tensor recv = zeros_buffer(send.shape(), ctx);
    g.comm->alltoall(send.data<float>(), recv.data<float>(), static_cast<size_t>(send.numel() / g.size),
                     DType::F32);
    return recv;
}

}  // namespace

void MoeLayer::keep_local_experts(const EpGroup& g) {
    clear_saved();
    const int64_t local = cfg_.num_experts / g.size;
    first_expert_ = g.rank * local;
    std::vector<std::unique_ptr<Mlp>> kept;
    for (int64_t j = 0; j < local; ++j) kept.push_back(std::move(experts_[static_cast<size_t>(first_expert_ + j)]));
    experts_ = std::move(kept);  // the other ranks' experts are destroyed here
    ep_ = g;
}

// Layouts: the token side's [E, rows, C] is [size][E_local][rows][C] (block p
// for rank p's experts); the expert side's [size][E_local][rows][C] has block
// q from rank q. Local expert l's input is rows [0, n(q, l)) of each block q,
// concatenated in rank order.
void MoeLayer::gather_route_counts() {
    const int64_t E = cfg_.num_experts, P = ep_.size;
    std::vector<int32_t> mine(static_cast<size_t>(E), 0);
    for (size_t r = 0; r < slot_.size(); ++r)
        if (slot_[r] >= 0) mine[static_cast<size_t>(expert_[r])] += 1;
    ep_counts_.assign(static_cast<size_t>(P * E), 0);
    ep_.comm->allgather(mine.data(), ep_counts_.data(), static_cast<size_t>(E), DType::I32);
    ep_rows_ = *std::max_element(ep_counts_.begin(), ep_counts_.end());
}

void MoeLayer::use_device_exchange(comm::Communicator* c) {
    const std::string label = module_label(*this);
    DS_CHECK(ep_.size > 1, DS_ERR_INVALID_STATE,
             "MoE%s: a device exchange for a layer that is not split over an expert group", label.c_str());
    DS_CHECK(c != nullptr && c->size() == ep_.size && c->rank() == ep_.rank, DS_ERR_INVALID_ARGUMENT,
             "MoE%s: the device communicator (rank %d of %d) is not the expert group's ranks (rank %d of %d)",
             label.c_str(), c ? c->rank() : -1, c ? c->size() : 0, ep_.rank, ep_.size);
    ep_.device = c;
}

void MoeLayer::forward_experts_ep(const float* x, float* y, RunContext& ctx) {
    const int64_t C = hidden_, E = cfg_.num_experts, P = ep_.size, El = E / P;
    const size_t k = static_cast<size_t>(cfg_.k);
    gather_route_counts();
    if (ep_rows_ == 0) return;  // no rank kept a route: nothing to exchange (all ranks agree)
    const int64_t rows = ep_rows_;
    auto count = [&](int64_t q, int64_t l) { return static_cast<int64_t>(ep_counts_[q * E + first_expert_ + l]); };

    Tensor send = zeros_buffer({E, rows, C}, ctx);
    float* sv = send.data<float>();
    for (size_t r = 0; r < slot_.size(); ++r)
        if (slot_[r] >= 0)
            std::memcpy(sv + (expert_[r] * rows + slot_[r]) * C, x + (r / k) * static_cast<size_t>(C),
                        static_cast<size_t>(C) * 4);
    const Tensor recv = exchange(ep_, send, ctx);
    Tensor back = zeros_buffer({E, rows, C}, ctx);
    for (int64_t l = 0; l < El; ++l) {
        int64_t n = 0;
        for (int64_t q = 0; q < P; ++q) n += count(q, l);
        if (n == 0) continue;
        Tensor xe = new_activation({n, C}, ctx);
        for (int64_t q = 0, at = 0; q < P; at += count(q, l), ++q)
            std::memcpy(xe.data<float>() + at * C, recv.data<float>() + ((q * El + l) * rows) * C,
                        static_cast<size_t>(count(q, l) * C) * 4);
        const Tensor ye = call_forward(*experts_[static_cast<size_t>(l)], xe, ctx);
        for (int64_t q = 0, at = 0; q < P; at += count(q, l), ++q)
            std::memcpy(back.data<float>() + ((q * El + l) * rows) * C, ye.data<float>() + at * C,
                        static_cast<size_t>(count(q, l) * C) * 4);
    }
    const Tensor ret = exchange(ep_, back, ctx);
    const float* rv = ret.data<float>();
    for (size_t r = 0; r < slot_.size(); ++r) {
        if (slot_[r] < 0) continue;
        float* dst = y + (r / k) * static_cast<size_t>(C);
        const float* src = rv + (expert_[r] * rows + slot_[r]) * C;
        for (int64_t c = 0; c < C; ++c) dst[c] += weight_[r] * src[c];
    }
    if (ctx.training) ep_returned_.keep(ret, ctx);
}

void MoeLayer::backward_experts_ep(const float* dy, float* dx, std::vector<float>& dweight, RunContext& ctx) {
    if (ep_rows_ == 0) return;  // as in forward: no route anywhere
    const int64_t C = hidden_, E = cfg_.num_experts, P = ep_.size, El = E / P, rows = ep_rows_;
    const size_t k = static_cast<size_t>(cfg_.k);
    auto count = [&](int64_t q, int64_t l) { return static_cast<int64_t>(ep_counts_[q * E + first_expert_ + l]); };
    // Combine's backward on the token side: d weight[r] = <dy[s], out>, d out = weight * dy[s].
    const float* ov = ep_returned_.get().data<float>();
    Tensor dsend = zeros_buffer({E, rows, C}, ctx);
    float* dsv = dsend.data<float>();
    for (size_t r = 0; r < slot_.size(); ++r) {
        if (slot_[r] < 0) continue;
        const int64_t row = expert_[r] * rows + slot_[r];
        const float* g = dy + (r / k) * static_cast<size_t>(C);
        float acc = 0.0f;
        for (int64_t c = 0; c < C; ++c) {
            acc += g[c] * ov[row * C + c];
            dsv[row * C + c] = weight_[r] * g[c];
        }
        dweight[r] = acc;
    }
    const Tensor drecv = exchange(ep_, dsend, ctx);
    Tensor dback = zeros_buffer({E, rows, C}, ctx);
    for (int64_t l = 0; l < El; ++l) {
        int64_t n = 0;
        for (int64_t q = 0; q < P; ++q) n += count(q, l);
        if (n == 0) continue;  // the expert did not run in forward
        Tensor dye = new_activation({n, C}, ctx);
        for (int64_t q = 0, at = 0; q < P; at += count(q, l), ++q)
            std::memcpy(dye.data<float>() + at * C, drecv.data<float>() + ((q * El + l) * rows) * C,
                        static_cast<size_t>(count(q, l) * C) * 4);
        const Tensor dxe = experts_[static_cast<size_t>(l)]->backward(dye, ctx);
        for (int64_t q = 0, at = 0; q < P; at += count(q, l), ++q)
            std::memcpy(dback.data<float>() + ((q * El + l) * rows) * C, dxe.data<float>() + at * C,
                        static_cast<size_t>(count(q, l) * C) * 4);
    }
    const Tensor dret = exchange(ep_, dback, ctx);
    const float* dv = dret.data<float>();
    for (size_t r = 0; r < slot_.size(); ++r) {
        if (slot_[r] < 0) continue;
        float* dst = dx + (r / k) * static_cast<size_t>(C);
        const float* src = dv + (expert_[r] * rows + slot_[r]) * C;
        for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
    }
}

void shard_moe_layer(MoeLayer& layer, comm::Communicator* c, int rank, int size) {
    const std::string label = module_label(layer);  // " 'h.0.mlp'" or ""
    const char* where = label.c_str();
    const int64_t E = layer.config().num_experts;
    DS_CHECK(size >= 1, DS_ERR_INVALID_ARGUMENT, "shard_moe_layer%s: size = %d must be >= 1", where, size);
    DS_CHECK(E % size == 0, DS_ERR_INVALID_ARGUMENT,
             "shard_moe_layer%s: num_experts = %lld is not a multiple of the expert-parallel size %d", where,
             static_cast<long long>(E), size);
    DS_CHECK(layer.ep_group().size == 1, DS_ERR_INVALID_STATE,
             "shard_moe_layer%s: the layer is already sharded (over %d ranks)", where, layer.ep_group().size);
    EpGroup g;
    try {
        g = make_ep_group(c, rank, size);
    } catch (const Error& e) {
        fail(e.status(), "shard_moe_layer%s: %s", where, e.what());  // the same error, naming the layer
    }
    if (size == 1) return;
    layer.keep_local_experts(g);
}

MoeParamSplit moe_expert_params(Module& root) {
    MoeParamSplit out;
    std::function<void(Module&, bool)> walk = [&](Module& m, bool in_expert) {
        for (Param* p : m.own_params()) (in_expert ? out.expert : out.replicated).push_back(p);
        std::set<const Module*> experts;
        if (auto* moe = dynamic_cast<MoeLayer*>(&m))
            for (size_t j = 0; j < moe->num_local_experts(); ++j) experts.insert(&moe->expert(j));
        for (Module* child : m.children()) walk(*child, in_expert || experts.count(child) != 0);
    };
    walk(root, false);
    return out;
}

}  // namespace ds::nn

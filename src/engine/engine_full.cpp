// The debugging copies (DeepSpeed's safe_get_full_* / safe_set_full_*):
// a parameter's fp32 master, gradient or optimizer state as one fp32 tensor.
// Where ZeRO partitions them, get gathers the fragments from every rank (a
// collective: every rank calls it with the same name) and set writes this
// rank's fragments (every rank passes the same value).
#include <cstring>
#include <vector>

#include "core/dlpack_interop.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/rank_agreement.h"
#include "kernels.h"

namespace ds {

namespace {

const char* full_name(FullTensor which) {
    switch (which) {
        case FullTensor::Param: return "fp32 weights";
        case FullTensor::Grad: return "gradient";
        default: return "optimizer state";
    }
}

// Index of optimizer state `key`, or DS_ERR_NOT_FOUND listing the valid keys.
size_t state_index(const Param& p, const char* key, const optim::Optimizer* opt) {
    DS_CHECK(key != nullptr, DS_ERR_INVALID_ARGUMENT, "argument 'key' is NULL");
    std::vector<std::string> names = opt ? opt->state_names() : std::vector<std::string>{};
    std::string valid;
    for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] == key) return i;
        valid += (i ? ", " : "") + names[i];
    }
    fail(DS_ERR_NOT_FOUND, "parameter '%s': no optimizer state '%s' (%s has: %s)", p.name.c_str(), key,
         opt ? opt->name() : "no optimizer", valid.empty() ? "none" : valid.c_str());
}

}  // namespace

// The tensor holding the whole parameter's copy on this rank, or an
// undefined Tensor when it is partitioned (then `flat` is the partition).
struct FullSource {
    Tensor whole;
    Tensor flat;        // partition buffer (part_numel elements)
    bool stale = false; // a gradient that holds nothing this window: zeros
};

static FullSource full_source(Param& p, FullTensor which, size_t state, FlatBuffers& flat) {
    FullSource s;
    switch (which) {
        case FullTensor::Param:
            s.whole = p.master;
            s.flat = flat.master;
            break;
        case FullTensor::Grad:
            s.whole = p.grad;
            s.flat = flat.grad;
            s.stale = p.grad.defined() ? p.grad_stale : flat.grad_stale;
            break;
        case FullTensor::OptimizerState:
            s.whole = p.state.empty() ? Tensor() : p.state[state];
            s.flat = flat.state[state];
            break;
    }
    return s;
}

void Engine::get_full(FullTensor which, const char* name, const char* key, const DLTensor* out) {
    Param* pp = nullptr;
    size_t si = 0;
    Tensor dst;
    auto checks = [&] {
        require_initialized("ds_engine_get_full_*");
        pp = which == FullTensor::Param ? &params_.get(name) : &trainable_param(name, full_name(which));
        si = which == FullTensor::OptimizerState ? state_index(*pp, key, optimizer_.get()) : 0;
        dst = from_dltensor(out, "out", /*require_contiguous=*/true);
        expect_device(out, Device::cpu(), "out");
        expect_dtype(out, DType::F32, "out");
        expect_shape(out, pp->shape, "out");
        agree::CallArgs a;
        a.args = agree::hash_str(key, agree::hash_str(name, agree::hash_bytes(&which, sizeof which)));
        a.what = "parameter name, tensor and key";
        return a;
    };
    // Collective when partitioned: every rank's checks, then agreement (rank_agreement.h).
    if (partitioned()) agree::enter(*comm_, agree::Call::GetFull, checks);
    else checks();
    Param& p = *pp;
    FullSource s = full_source(p, which, si, params_.flat());
    if (!p.trainable || s.whole.defined()) {
        if (s.stale) dst.zero();
        else dst.copy_from(s.whole);
        return;
    }
    // Partitioned: every rank packs its fragments (in fp32) into a block of
    // the largest rank's size, an all-gather exchanges the blocks, and each
    // rank unpacks every rank's fragments. Exact, including -0.0.
    const zero::FlatPartitionLayout& L = params_.flat().layout;
    const std::vector<zero::FlatFragment>& frags = L.fragments[static_cast<size_t>(p.trainable_index)];
    std::vector<int64_t> per_rank(static_cast<size_t>(world_size_), 0);
    for (const zero::FlatFragment& f : frags) per_rank[static_cast<size_t>(f.rank)] += f.length;
    int64_t block = 1;
    for (int64_t n : per_rank) block = std::max(block, n);
    std::vector<float> mine(static_cast<size_t>(block), 0.0f);
    int64_t pos = 0;
    const int sk = dtype_to_kernel(s.flat.dtype());
    const size_t es = s.flat.element_size();
    for (const zero::FlatFragment& f : frags) {
        if (f.rank != rank_) continue;
        if (!s.stale)
            dsk_convert(static_cast<const char*>(s.flat.data_ptr()) + f.partition_offset * static_cast<int64_t>(es),
                        sk, mine.data() + pos, DSK_F32, static_cast<size_t>(f.length));
        pos += f.length;
    }
    std::vector<float> all(static_cast<size_t>(block * world_size_));
    comm_->allgather(mine.data(), all.data(), static_cast<size_t>(block), DType::F32);
    std::vector<int64_t> cursor(static_cast<size_t>(world_size_), 0);
    float* d = dst.data<float>();
    for (const zero::FlatFragment& f : frags) {
        const float* src = all.data() + f.rank * block + cursor[static_cast<size_t>(f.rank)];
        std::memcpy(d + f.param_offset, src, static_cast<size_t>(f.length) * sizeof(float));
        cursor[static_cast<size_t>(f.rank)] += f.length;
    }
}

void Engine::set_full(FullTensor which, const char* name, const char* key, const DLTensor* value) {
    require_initialized("ds_engine_set_full_*");
    Param& p = which == FullTensor::Param ? params_.get(name) : trainable_param(name, full_name(which));
    const size_t si = which == FullTensor::OptimizerState ? state_index(p, key, optimizer_.get()) : 0;
    Tensor src = from_dltensor(value, "value", /*require_contiguous=*/false);
    expect_device(value, Device::cpu(), "value");
    expect_dtype(value, DType::F32, "value");
    expect_shape(value, p.shape, "value");
    FlatBuffers& flat = params_.flat();
    FullSource s = full_source(p, which, si, flat);
    if (!p.trainable || s.whole.defined()) {
        s.whole.copy_from(src);
        if (which == FullTensor::Grad) {
            p.grad_stale = false;
            p.norm_cached = false;
        }
    } else {
        // Partitioned: write this rank's fragments.
        Tensor value32 = src.is_contiguous() ? src : src.to(DType::F32, alloc_, MemCategory::Buffers);
        const float* v = value32.data<float>();
        if (which == FullTensor::Grad && flat.grad_stale) {
            flat.grad.zero();
            flat.grad_stale = false;
        }
        const int sk = dtype_to_kernel(s.flat.dtype());
        const size_t es = s.flat.element_size();
        for (const zero::FlatFragment& f : flat.layout.fragments[static_cast<size_t>(p.trainable_index)]) {
            if (f.rank != rank_) continue;
            dsk_convert(v + f.param_offset, DSK_F32,
                        static_cast<char*>(s.flat.data_ptr()) + f.partition_offset * static_cast<int64_t>(es), sk,
                        static_cast<size_t>(f.length));
        }
    }
    if (which == FullTensor::Param && p.working.data_ptr() != p.master.data_ptr()) p.working.copy_from(src);
}

}  // namespace ds

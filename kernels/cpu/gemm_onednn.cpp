// The oneDNN GEMM engine: matmul primitives, created once per problem
// layout (shape, transposes, leading dimensions, batch strides, alpha, beta)
// and kept in a process-wide cache. The primitives run with a user-provided
// scratchpad from a per-thread buffer, so concurrent calls (also with the
// same primitive) share no state. Without oneDNN (DS_WITH_ONEDNN unset) the
// engine reports itself unavailable.
#include "gemm_engines.h"
#include "nn_gemm.h"

#ifdef DS_WITH_ONEDNN

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "arg_check.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace ds::kernels::gemm {

namespace {

using dnnl::memory;
using dt = dnnl::memory::data_type;

dnnl::engine& cpu_engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

// A grow-only 64-byte-aligned buffer, one per thread and purpose.
struct ThreadBuffer {
    void* p = nullptr;
    size_t n = 0;
    ~ThreadBuffer() { std::free(p); }
    void* get(size_t bytes) {
        if (bytes > n) {
            std::free(p);
            n = 0;
            p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
            if (p == nullptr) throw std::bad_alloc();
            n = bytes;
        }
        return p;
    }
};
thread_local ThreadBuffer t_scratch, t_packed;

struct Entry {
    bool usable = true;  // false: oneDNN has no native primitive for this (bf16 on an AVX2-only CPU)
    dnnl::matmul matmul;
    memory::desc scratch_md;
    size_t scratch_bytes = 0;
    // Linear only: the user's weights, their packed layout and the reorder.
    bool reorder_needed = false;
    memory::desc user_w, packed_w;
    dnnl::reorder reorder;
};

using Key = std::array<int64_t, 17>;
constexpr size_t kMaxEntries = 512;  // a cache this full is cleared (shapes churn)
std::mutex g_mu;
std::map<Key, std::shared_ptr<const Entry>> g_cache;

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

template <class Make>
std::shared_ptr<const Entry> cached(const Key& key, Make&& make) {
    {
        std::lock_guard<std::mutex> lock(g_mu);
        auto it = g_cache.find(key);
        if (it != g_cache.end()) return it->second;
    }
    auto e = std::make_shared<const Entry>(make());  // created outside the lock
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_cache.size() >= kMaxEntries) g_cache.clear();
    return g_cache.emplace(key, e).first->second;
}

dnnl::primitive_attr attr_for(float alpha, float beta) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (beta != 0.0f) {
        dnnl::post_ops po;
        po.append_sum(beta);
        attr.set_post_ops(po);
    }
    return attr;
}

// A row-major rows x cols operand stored transposed or not, optionally batched.
memory::desc operand(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld, bool trans,
                     dt type = dt::f32) {
    const memory::dims row_str = trans ? memory::dims{1, ld} : memory::dims{ld, 1};
    if (batch == 0) return memory::desc({rows, cols}, type, row_str);
    return memory::desc({batch, rows, cols}, type, {stride, row_str[0], row_str[1]});
}

Entry make_gemm(const Problem& p) {
    // batch 0 in operand(): a 2-D problem; a zero stride broadcasts one matrix.
    const int64_t b = p.batch > 1 ? p.batch : 0;
    const int64_t ba = b && p.stride_a == 0 ? 1 : b, bb = b && p.stride_b == 0 ? 1 : b;
    const memory::desc a = operand(ba, p.stride_a, p.m, p.k, p.lda, p.trans_a);
    const memory::desc w = operand(bb, p.stride_b, p.k, p.n, p.ldb, p.trans_b);
    const memory::desc c = operand(b, p.stride_c, p.m, p.n, p.ldc, false);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, w, c), attr_for(p.alpha, p.beta), cpu_engine());
    Entry e;
    e.matmul = dnnl::matmul(pd);
    e.scratch_md = pd.scratchpad_desc();
    e.scratch_bytes = e.scratch_md.get_size();
    return e;
}

dnnl::stream& thread_stream() {
    thread_local dnnl::stream s(cpu_engine());
    return s;
}

void* scratch(const Entry& e) { return e.scratch_bytes ? t_scratch.get(e.scratch_bytes) : nullptr; }

int engine_error(const char* what, const dnnl::error& ex) {
    return set_last_error(DSK_ERR_ENGINE, "%s: oneDNN failed: %s (status %d)", what, ex.what(),
                          static_cast<int>(ex.status));
}

}  // namespace

bool onednn_init(std::string* name) {
    try {
        if (dnnl::engine::get_count(dnnl::engine::kind::cpu) == 0) {
            *name = "no oneDNN CPU engine";
            return false;
        }
        cpu_engine();
        const dnnl_version_t* v = dnnl_version();
        *name = "onednn " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
        return true;
    } catch (const dnnl::error& ex) {
        *name = std::string("oneDNN failed to start: ") + ex.what();
        return false;
    }
}

int onednn_gemm(const Problem& p) {
    const Key key = {0, p.trans_a, p.trans_b, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.batch, p.stride_a, p.stride_b,
                     p.stride_c, bits(p.alpha), bits(p.beta), 0, 0};
    std::shared_ptr<const Entry> e;
    try {
        e = cached(key, [&] { return make_gemm(p); });
    } catch (const dnnl::error&) {
        // A layout this oneDNN does not take (e.g. overlapping batch strides):
        // one product at a time, or the blocked loop for a single one.
        if (p.batch <= 1) return -1;
        for (int64_t i = 0; i < p.batch; ++i)
            if (int s = onednn_gemm(batch_item(p, i)); s < 0)
                blocked_gemm(batch_item(p, i));
            else if (s != DSK_OK)
                return s;
        return DSK_OK;
    }
    try {
        auto& eng = cpu_engine();
        const int64_t b = p.batch > 1 ? p.batch : 0;
        memory a(operand(b && p.stride_a == 0 ? 1 : b, p.stride_a, p.m, p.k, p.lda, p.trans_a), eng,
                 const_cast<float*>(p.a));
        memory w(operand(b && p.stride_b == 0 ? 1 : b, p.stride_b, p.k, p.n, p.ldb, p.trans_b), eng,
                 const_cast<float*>(p.b));
        memory c(operand(b, p.stride_c, p.m, p.n, p.ldc, false), eng, p.c);
        std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, c}};
        if (e->scratch_bytes) args.emplace(DNNL_ARG_SCRATCHPAD, memory(e->scratch_md, eng, scratch(*e)));
        e->matmul.execute(thread_stream(), args);
        thread_stream().wait();
        return DSK_OK;
    } catch (const dnnl::error& ex) {
        return engine_error("dsk_gemm", ex);
    }
}

int onednn_linear_fwd(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                      int64_t out, bool pack) {
    const Key key = {1, rows, in, out, bias != nullptr, pack, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    std::shared_ptr<const Entry> e;
    const memory::desc src({rows, in}, dt::f32, {in, 1});
    const memory::desc dst({rows, out}, dt::f32, {out, 1});
    const memory::desc bmd({1, out}, dt::f32, {out, 1});
    try {
        e = cached(key, [&] {
            const memory::desc user_w({in, out}, dt::f32, {1, in});  // w [out, in] read as w^T
            // pack: let the matmul choose its weight layout (format_tag::any)
            // and reorder into it below; else it reads the weights as stored.
            const memory::desc wmd = pack ? memory::desc({in, out}, dt::f32, memory::format_tag::any) : user_w;
            dnnl::matmul::desc d = bias ? dnnl::matmul::desc(src, wmd, bmd, dst) : dnnl::matmul::desc(src, wmd, dst);
            dnnl::matmul::primitive_desc pd(d, attr_for(1.0f, 0.0f), cpu_engine());
            Entry en;
            en.matmul = dnnl::matmul(pd);
            en.scratch_md = pd.scratchpad_desc();
            en.scratch_bytes = en.scratch_md.get_size();
            en.user_w = user_w;
            en.packed_w = pd.weights_desc();
            en.reorder_needed = en.packed_w != en.user_w;
            if (en.reorder_needed)
                en.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), en.user_w, cpu_engine(),
                                                                         en.packed_w));
            return en;
        });
    } catch (const dnnl::error&) {
        return -1;  // the caller runs GEMM + bias
    }
    try {
        auto& eng = cpu_engine();
        auto& s = thread_stream();
        memory user_w(e->user_w, eng, const_cast<float*>(w));
        memory weights = user_w;
        if (e->reorder_needed) {
            weights = memory(e->packed_w, eng, t_packed.get(e->packed_w.get_size()));
            e->reorder.execute(s, user_w, weights);
        }
        std::unordered_map<int, memory> args = {
            {DNNL_ARG_SRC, memory(src, eng, const_cast<float*>(x))},
            {DNNL_ARG_WEIGHTS, weights},
            {DNNL_ARG_DST, memory(dst, eng, y)}};
        if (bias) args.emplace(DNNL_ARG_BIAS, memory(bmd, eng, const_cast<float*>(bias)));
        if (e->scratch_bytes) args.emplace(DNNL_ARG_SCRATCHPAD, memory(e->scratch_md, eng, scratch(*e)));
        e->matmul.execute(s, args);
        s.wait();
        return DSK_OK;
    } catch (const dnnl::error& ex) {
        return engine_error("dsk_linear_fwd", ex);
    }
}

namespace {

// The bf16 matmul for a problem: bf16 A and B (laid out as the fp32 ones in
// p), fp32 C, fp32 bias [1, n] when `bias`. Not usable when oneDNN refuses
// it or only has its reference (scalar) implementation for it.
Entry make_gemm_bf16(const Problem& p, bool bias) {
    const memory::desc a = operand(0, 0, p.m, p.k, p.lda, p.trans_a, dt::bf16);
    const memory::desc w = operand(0, 0, p.k, p.n, p.ldb, p.trans_b, dt::bf16);
    const memory::desc c = operand(0, 0, p.m, p.n, p.ldc, false);
    const memory::desc bmd({1, p.n}, dt::f32, {p.n, 1});
    Entry e;
    try {
        dnnl::matmul::desc d = bias ? dnnl::matmul::desc(a, w, bmd, c) : dnnl::matmul::desc(a, w, c);
        dnnl::matmul::primitive_desc pd(d, attr_for(p.alpha, p.beta), cpu_engine());
        if (std::string(pd.impl_info_str()).find("ref") != std::string::npos) {
            e.usable = false;
            return e;
        }
        e.matmul = dnnl::matmul(pd);
        e.scratch_md = pd.scratchpad_desc();
        e.scratch_bytes = e.scratch_md.get_size();
    } catch (const dnnl::error&) {
        e.usable = false;
    }
    return e;
}

}  // namespace

int onednn_gemm_bf16(const Problem& p, const uint16_t* a, const uint16_t* b, const float* bias) {
    const Key key = {2, p.trans_a, p.trans_b, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, bias != nullptr, 0, 0,
                     0, bits(p.alpha), bits(p.beta), 0, 0};
    std::shared_ptr<const Entry> e = cached(key, [&] { return make_gemm_bf16(p, bias != nullptr); });
    if (!e->usable) return -1;
    try {
        auto& eng = cpu_engine();
        std::unordered_map<int, memory> args = {
            {DNNL_ARG_SRC, memory(operand(0, 0, p.m, p.k, p.lda, p.trans_a, dt::bf16), eng, const_cast<uint16_t*>(a))},
            {DNNL_ARG_WEIGHTS,
             memory(operand(0, 0, p.k, p.n, p.ldb, p.trans_b, dt::bf16), eng, const_cast<uint16_t*>(b))},
            {DNNL_ARG_DST, memory(operand(0, 0, p.m, p.n, p.ldc, false), eng, p.c)}};
        if (bias) args.emplace(DNNL_ARG_BIAS, memory(memory::desc({1, p.n}, dt::f32, {p.n, 1}), eng, const_cast<float*>(bias)));
        if (e->scratch_bytes) args.emplace(DNNL_ARG_SCRATCHPAD, memory(e->scratch_md, eng, scratch(*e)));
        e->matmul.execute(thread_stream(), args);
        thread_stream().wait();
        return DSK_OK;
    } catch (const dnnl::error& ex) {
        return engine_error("dsk_gemm_bf16", ex);
    }
}

bool onednn_bf16_native() {
    Problem p;
    p.m = p.n = p.k = 64, p.lda = p.ldb = p.ldc = 64;
    try {
        return make_gemm_bf16(p, false).usable;
    } catch (const std::exception&) {
        return false;
    }
}

}  // namespace ds::kernels::gemm

#else  // !DS_WITH_ONEDNN

namespace ds::kernels::gemm {
bool onednn_init(std::string* name) {
    *name = "not built (DS_WITH_ONEDNN=OFF or oneDNN not found)";
    return false;
}
int onednn_gemm(const Problem&) { return -1; }
int onednn_gemm_bf16(const Problem&, const uint16_t*, const uint16_t*, const float*) { return -1; }
bool onednn_bf16_native() { return false; }
int onednn_linear_fwd(const float*, const float*, const float*, float*, int64_t, int64_t, int64_t, bool) {
    return -1;
}
}  // namespace ds::kernels::gemm

#endif

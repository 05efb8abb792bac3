// dsk_cuda_attention_forward / _backward on the device, with the products on
// cuBLAS and on the tiled kernels (DSK_CUDA_ATTENTION_*): against the float64
// references (max |x - y| / (1 + max |y|) < 1e-5, fp32 products; bf16
// products at the CPU test's bf16 bounds), saved and recomputed
// probabilities giving the same gradients, two runs the same bits, the
// backend table's entries; the tiled kernels also against their host
// emulation (tests/unit/cuda_attention_host.h) bit for bit (fixed summation
// orders, --fmad=false, the exp in plain arithmetic). Then GPT-2 small's
// attention (B 8, T 1024, C 768, 12 heads, causal, dropout 0.1) timed both
// ways, fp32 and bf16 products, the two agreeing within the tolerances
// (printed; timings are not assertions). Exit 77 without a device.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "../unit/cuda_attention_host.h"
#include "backend.h"
#include "gpu_test_util.h"
#include "nn_attention.h"

using gput::DevBuf;
using gput::down;

namespace {

double rel_err(const std::vector<float>& x, const std::vector<double>& y) {
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double d = std::fabs(static_cast<double>(x[i]) - y[i]);
        if (!(d <= e)) e = d;
        m = std::max(m, std::fabs(y[i]));
    }
    return e / (1.0 + m);
}

struct Case {
    int64_t B, T, C, H;
    int causal;
    float p;
    int bf16;
};

const char* products_name() { return dsk_cuda_attention_products() == DSK_CUDA_ATTENTION_TILED ? "tiled" : "cublas"; }

void run_case(const Case& k) {
    dsk_attention_args a{};
    a.batch = k.B, a.seq = k.T, a.channels = k.C, a.heads = k.H, a.causal = k.causal, a.dropout_p = k.p;
    a.bf16_products = k.bf16;
    a.dropout_key.seed = 5, a.dropout_key.stream = 2, a.dropout_key.module_id = 3, a.dropout_key.offset = 777;
    const size_t nq = static_cast<size_t>(k.B * k.T * 3 * k.C), no = static_cast<size_t>(k.B * k.T * k.C);
    const size_t np = static_cast<size_t>(k.B * k.H * k.T * k.T);
    std::mt19937 rng(static_cast<unsigned>(k.T * 7 + k.causal));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> qkv(nq), dout(no);
    for (auto& x : qkv) x = nd(rng);
    for (auto& x : dout) x = nd(rng);

    const std::vector<float> nan_o(no, NAN), nan_q(nq, NAN), nan_p(np, NAN);
    DevBuf dq(qkv.data(), nq * 4), ddo(dout.data(), no * 4), dout_b(nan_o.data(), no * 4), dprobs(nan_p.data(), np * 4);
    DevBuf dg1(nan_q.data(), nq * 4), dg2(nan_q.data(), nq * 4), dout2(nan_o.data(), no * 4);
    auto t0 = std::chrono::steady_clock::now();
    GPU_OK(dsk_cuda_attention_forward(dq.as<float>(), dout_b.as<float>(), dprobs.as<float>(), &a, nullptr));
    GPU_OK(dsk_cuda_attention_backward(dq.as<float>(), dprobs.as<float>(), ddo.as<float>(), dg1.as<float>(), &a,
                                       nullptr));
    gput::cuda_ok(cudaDeviceSynchronize(), "sync");
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    GPU_OK(dsk_cuda_attention_forward(dq.as<float>(), dout2.as<float>(), nullptr, &a, nullptr));
    GPU_OK(dsk_cuda_attention_backward(dq.as<float>(), nullptr, ddo.as<float>(), dg2.as<float>(), &a, nullptr));
    const std::vector<float> out = down(dout_b, no), probs = down(dprobs, np), g1 = down(dg1, nq);
    const std::vector<float> out2 = down(dout2, no), g2 = down(dg2, nq);

    std::vector<double> rq(qkv.begin(), qkv.end()), rdo(dout.begin(), dout.end()), ro(no), rp(np), rg(nq);
    dsk_ref_attention_forward(rq.data(), ro.data(), rp.data(), &a);
    dsk_ref_attention_backward(rq.data(), rdo.data(), rg.data(), &a);
    const double tf = k.bf16 ? 2e-2 : 1e-5, tb = k.bf16 ? 5e-2 : 1e-5;
    const double eo = rel_err(out, ro), ep = rel_err(probs, rp), eg = rel_err(g1, rg);
    std::printf("%s: B=%lld T=%lld C=%lld H=%lld causal=%d p=%g bf16=%d: out %.2e probs %.2e dqkv %.2e (%.2f ms "
                "fwd+bwd)\n",
                products_name(), static_cast<long long>(k.B), static_cast<long long>(k.T), static_cast<long long>(k.C),
                static_cast<long long>(k.H), k.causal, static_cast<double>(k.p), k.bf16, eo, ep, eg, ms);
    GPU_CHECK(eo < tf, "out vs reference %g", eo);
    GPU_CHECK(ep < tf, "probs vs reference %g", ep);
    GPU_CHECK(eg < tb, "dqkv vs reference %g", eg);
    GPU_CHECK(out == out2, "out with and without probs differ");
    GPU_CHECK(g1 == g2, "dqkv with saved and recomputed probs differ");

    if (dsk_cuda_attention_products() == DSK_CUDA_ATTENTION_TILED) {
        // The host emulation of the same kernels: the same bits.
        std::vector<float> ho(no, NAN), hp(np, NAN), hg(nq, NAN);
        attn_host::forward(a, qkv.data(), ho.data(), hp.data());
        attn_host::backward(a, qkv.data(), hp.data(), dout.data(), hg.data());
        GPU_CHECK(ho == out, "out differs from the host emulation");
        GPU_CHECK(hp == probs, "probs differ from the host emulation");
        GPU_CHECK(hg == g1, "dqkv differs from the host emulation");
    }

    // Again, through the backend table: the same bits (run to run).
    const dsk_backend* be = dsk_backend_cuda(nullptr);
    GPU_CHECK(be != nullptr && be->attention_forward != nullptr && be->attention_backward != nullptr, "table entries");
    if (be != nullptr && be->attention_forward != nullptr && be->attention_backward != nullptr) {
        GPU_OK(be->attention_forward(be, dq.as<float>(), dout2.as<float>(), dprobs.as<float>(), &a));
        GPU_OK(be->attention_backward(be, dq.as<float>(), dprobs.as<float>(), ddo.as<float>(), dg2.as<float>(), &a));
        GPU_CHECK(down(dout2, no) == out, "out differs run to run");
        GPU_CHECK(down(dg2, nq) == g1, "dqkv differs run to run");
    }
}

// GPT-2 small's attention, one forward (probabilities saved) and backward,
// timed with the products on cuBLAS and on the tiled kernels; the results
// of the two within the reference tolerances of each other.
void time_gpt_shape(int bf16) {
    dsk_attention_args a{};
    a.batch = 8, a.seq = 1024, a.channels = 768, a.heads = 12, a.causal = 1, a.dropout_p = 0.1f;
    a.bf16_products = bf16;
    a.dropout_key.seed = 1, a.dropout_key.stream = 2, a.dropout_key.module_id = 3;
    const size_t nq = static_cast<size_t>(a.batch * a.seq * 3 * a.channels);
    const size_t no = static_cast<size_t>(a.batch * a.seq * a.channels);
    const size_t np = static_cast<size_t>(a.batch * a.heads * a.seq * a.seq);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> qkv(nq), dout(no);
    for (auto& x : qkv) x = nd(rng);
    for (auto& x : dout) x = nd(rng);
    DevBuf dq(qkv.data(), nq * 4), ddo(dout.data(), no * 4), dprobs(nullptr, np * 4), dres(nullptr, no * 4),
        dg(nullptr, nq * 4);
    std::vector<float> outs[2], grads[2];
    double ms[2] = {0, 0};
    const int products[2] = {DSK_CUDA_ATTENTION_CUBLAS, DSK_CUDA_ATTENTION_TILED};
    for (int round = 0; round < 3; ++round)  // round 0 warms up (cuBLAS's heuristics, the memory pool)
        for (int i = 0; i < 2; ++i) {
            GPU_OK(dsk_cuda_attention_set_products(products[i]));
            gput::cuda_ok(cudaDeviceSynchronize(), "sync");
            const auto t0 = std::chrono::steady_clock::now();
            GPU_OK(dsk_cuda_attention_forward(dq.as<float>(), dres.as<float>(), dprobs.as<float>(), &a, nullptr));
            GPU_OK(dsk_cuda_attention_backward(dq.as<float>(), dprobs.as<float>(), ddo.as<float>(), dg.as<float>(), &a,
                                               nullptr));
            gput::cuda_ok(cudaDeviceSynchronize(), "sync");
            const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (round > 0) ms[i] += t / 2;
            if (round == 2) outs[i] = down(dres, no), grads[i] = down(dg, nq);
        }
    const std::vector<double> tiled_out(outs[1].begin(), outs[1].end()), tiled_g(grads[1].begin(), grads[1].end());
    const double eo = rel_err(outs[0], tiled_out), eg = rel_err(grads[0], tiled_g);
    // fwd 2 products, bwd 4, each 2*B*H*T*T*hd flops (causal ones computed whole on cuBLAS).
    const double gflop = 6.0 * 2 * 8 * 12 * 1024.0 * 1024.0 * 64 / 1e9;
    std::printf("GPT-2 small attention fwd+bwd, %s products: cublas %.2f ms, tiled %.2f ms, tiled/cublas %.2fx "
                "(%.0f GFLOP of products: %.1f / %.1f TFLOP/s); cublas vs tiled: out %.2e dqkv %.2e\n",
                bf16 ? "bf16" : "fp32", ms[0], ms[1], ms[1] / ms[0], gflop, gflop / ms[0], gflop / ms[1], eo, eg);
    GPU_CHECK(eo < (bf16 ? 2e-2 : 1e-5), "GPT shape: out, cublas vs tiled %g", eo);
    GPU_CHECK(eg < (bf16 ? 5e-2 : 1e-5), "GPT shape: dqkv, cublas vs tiled %g", eg);
    GPU_OK(dsk_cuda_attention_set_products(DSK_CUDA_ATTENTION_CUBLAS));
}

}  // namespace

int main() {
    if (int rc = gput::require_device()) return rc;
    const Case cases[] = {
        {1, 1, 4, 1, 1, 0.0f, 0},     {2, 7, 12, 3, 0, 0.1f, 0},    {2, 17, 32, 2, 1, 0.1f, 0},
        {3, 33, 24, 4, 0, 0.0f, 0},   {1, 150, 8, 1, 1, 0.1f, 0},   {64, 11, 64, 8, 1, 0.1f, 0},
        {4, 256, 256, 4, 1, 0.1f, 0}, {4, 256, 256, 4, 0, 0.0f, 0}, {2, 40, 64, 4, 1, 0.1f, 1},
    };
    for (int products : {DSK_CUDA_ATTENTION_CUBLAS, DSK_CUDA_ATTENTION_TILED}) {
        GPU_OK(dsk_cuda_attention_set_products(products));
        for (const Case& c : cases) run_case(c);
    }
    GPU_CHECK(dsk_cuda_attention_set_products(7) == DSK_ERR_INVALID_ARGUMENT, "products 7 accepted");
    time_gpt_shape(0);
    time_gpt_shape(1);
    return gput::finish("test_gpu_attention");
}

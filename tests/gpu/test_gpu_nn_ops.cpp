// The built-in layers' CUDA ops on the device against the float64
// references of kernels/ref, with the CPU kernels' own tolerances
// (tests/unit/nn_ops_kernels_test.cpp), and against the CPU kernels where
// the per-element code is shared: dropout draws the CPU's mask bit for bit
// (offsets not multiple of 4 included), GELU within 2 ulps of the CPU.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "gpu_test_util.h"
#include "nn_ops.h"

using gput::DevBuf;
using gput::randv;
using gput::down;

namespace {

// max |a - b| / (atol + rtol*|b|): <= 1 passes.
double worst(const std::vector<float>& a, const std::vector<double>& b, double atol, double rtol) {
    double w = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double e = std::fabs(static_cast<double>(a[i]) - b[i]) / (atol + rtol * std::fabs(b[i]));
        if (!(e <= w)) w = e;  // NaN counts as worst
    }
    return w;
}

std::vector<double> to_d(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

void test_gelu_add() {
    const size_t n = 1 << 20;
    const std::vector<float> x = randv(n, -8, 8, 1), dy = randv(n, -1, 1, 2);
    DevBuf dx(x.data(), n * 4), ddy(dy.data(), n * 4), dout(x.data(), n * 4);
    GPU_OK(dsk_cuda_gelu_fwd(dx.as<float>(), dout.as<float>(), n, nullptr));
    std::vector<float> y = down(dout, n), ycpu(n);
    std::vector<double> yr(n), xd = to_d(x), dyd = to_d(dy), gr(n);
    dsk_ref_gelu_fwd(xd.data(), yr.data(), n);
    GPU_CHECK(worst(y, yr, 1e-6, 4e-6) <= 1.0, "gelu fwd vs reference: %g", worst(y, yr, 1e-6, 4e-6));
    dsk_cpu_gelu_fwd(x.data(), ycpu.data(), n);
    size_t far = 0;
    for (size_t i = 0; i < n; ++i) far += std::fabs(y[i] - ycpu[i]) > 2 * std::fabs(ycpu[i]) * 1.2e-7f + 1e-30f;
    GPU_CHECK(far == 0, "gelu fwd: %zu elements more than 2 ulps from the CPU kernel", far);
    GPU_OK(dsk_cuda_gelu_bwd(dx.as<float>(), ddy.as<float>(), dout.as<float>(), n, nullptr));
    const std::vector<float> g = down(dout, n);
    dsk_ref_gelu_bwd(xd.data(), dyd.data(), gr.data(), n);
    GPU_CHECK(worst(g, gr, 2e-6, 4e-6) <= 1.0, "gelu bwd vs reference: %g", worst(g, gr, 2e-6, 4e-6));

    GPU_OK(dsk_cuda_add(dx.as<float>(), ddy.as<float>(), dout.as<float>(), n, nullptr));
    std::vector<float> s = down(dout, n);
    bool ok = true;
    for (size_t i = 0; i < n; ++i) ok &= s[i] == x[i] + dy[i];
    GPU_CHECK(ok, "add differs from x + dy");
    GPU_OK(dsk_cuda_add_inplace(dout.as<float>(), ddy.as<float>(), n, nullptr));
    s = down(dout, n);
    ok = true;
    for (size_t i = 0; i < n; ++i) ok &= s[i] == (x[i] + dy[i]) + dy[i];
    GPU_CHECK(ok, "add_inplace differs");
    const size_t rows = 1024, dim = n / rows;
    GPU_OK(dsk_cuda_bias_add(dout.as<float>(), ddy.as<float>(), rows, dim, nullptr));
    const std::vector<float> b = down(dout, n);
    ok = true;
    for (size_t i = 0; i < n; ++i) ok &= b[i] == s[i] + dy[i % dim];
    GPU_CHECK(ok, "bias_add differs");
}

void test_bias_grad() {
    for (int64_t rows : {int64_t{1}, int64_t{300}, int64_t{5000}})
        for (int64_t out : {int64_t{1}, int64_t{768}, int64_t{1001}}) {
            const std::vector<float> dy = randv(static_cast<size_t>(rows * out), -1, 1, 21), db0 = randv(out, -1, 1, 22);
            DevBuf ddy(dy.data(), dy.size() * 4), ddb(db0.data(), db0.size() * 4);
            GPU_OK(dsk_cuda_bias_grad(ddy.as<float>(), ddb.as<float>(), rows, out, nullptr));
            std::vector<double> want(db0.begin(), db0.end());
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < out; ++j) want[j] += dy[r * out + j];
            GPU_CHECK(worst(down(ddb, out), want, 1e-5 * rows, 1e-6) <= 1.0, "bias_grad rows %lld out %lld",
                      static_cast<long long>(rows), static_cast<long long>(out));
        }
}

void test_dropout() {
    for (uint64_t offset : {uint64_t{0}, uint64_t{3}, (uint64_t{1} << 33) + 1})
        for (size_t n : {size_t{1}, size_t{7}, size_t{1000003}}) {
            dsk_dropout_key key{0xDEADBEEFCAFEull, 12345, 9, 0, offset};
            const std::vector<float> x = randv(n, -3, 3, 5);
            std::vector<float> cpu(n);
            DevBuf dx(x.data(), n * 4), dy(x.data(), n * 4);
            GPU_OK(dsk_cuda_dropout_fwd(dx.as<float>(), dy.as<float>(), n, 0.3f, &key, nullptr));
            dsk_cpu_dropout_fwd(x.data(), cpu.data(), n, 0.3f, &key);
            GPU_CHECK(down(dy, n) == cpu, "dropout fwd offset %llu n %zu: mask differs from the CPU's",
                      static_cast<unsigned long long>(offset), n);
            GPU_OK(dsk_cuda_dropout_apply(dx.as<float>(), n, 0.3f, &key, nullptr));
            GPU_CHECK(down(dx, n) == cpu, "dropout apply differs (n %zu)", n);
        }
}

void test_layernorm() {
    for (size_t rows : {size_t{1}, size_t{7}, size_t{300}})
        for (size_t dim : {size_t{1}, size_t{33}, size_t{768}, size_t{4100}})
            for (bool affine : {true, false}) {
                const size_t n = rows * dim;
                const std::vector<float> x = randv(n, -2, 5, 7), gm = randv(dim, 0.5f, 1.5f, 8),
                                         bt = randv(dim, -1, 1, 9), dy = randv(n, -1, 1, 10);
                DevBuf dx(x.data(), n * 4), dg(gm.data(), dim * 4), db(bt.data(), dim * 4), dyv(dy.data(), n * 4),
                    y(x.data(), n * 4), mean(x.data(), rows * 4), rstd(x.data(), rows * 4), dxo(x.data(), n * 4);
                std::vector<float> zeros(dim, 0.0f);
                DevBuf dgam(zeros.data(), dim * 4), dbet(zeros.data(), dim * 4);
                GPU_OK(dsk_cuda_layernorm_fwd(dx.as<float>(), affine ? dg.as<float>() : nullptr,
                                              affine ? db.as<float>() : nullptr, y.as<float>(), mean.as<float>(),
                                              rstd.as<float>(), rows, dim, 1e-5f, nullptr));
                std::vector<double> xd = to_d(x), gd = to_d(gm), bd = to_d(bt), yr(n), mr(rows), rr(rows);
                dsk_ref_layernorm_fwd(xd.data(), affine ? gd.data() : nullptr, affine ? bd.data() : nullptr, yr.data(),
                                      mr.data(), rr.data(), rows, dim, 1e-5);
                GPU_CHECK(worst(down(y, n), yr, 2e-5, 1e-5) <= 1.0, "layernorm fwd rows %zu dim %zu", rows, dim);
                GPU_CHECK(worst(down(rstd, rows), rr, 0, dim == 1 ? 1e-2 : 1e-5) <= 1.0, "layernorm rstd dim %zu", dim);
                GPU_OK(dsk_cuda_layernorm_bwd(dyv.as<float>(), dx.as<float>(), mean.as<float>(), rstd.as<float>(),
                                              affine ? dg.as<float>() : nullptr, dxo.as<float>(), dgam.as<float>(),
                                              dbet.as<float>(), rows, dim, nullptr));
                std::vector<double> dyd = to_d(dy), dxr(n), dgr(dim, 0.0), dbr(dim, 0.0);
                dsk_ref_layernorm_bwd(dyd.data(), xd.data(), mr.data(), rr.data(), affine ? gd.data() : nullptr,
                                      dxr.data(), dgr.data(), dbr.data(), rows, dim);
                if (dim > 1) GPU_CHECK(worst(down(dxo, n), dxr, 2e-4, 1e-4) <= 1.0, "layernorm dx rows %zu dim %zu", rows, dim);
                GPU_CHECK(worst(down(dgam, dim), dgr, 1e-4 * std::sqrt(double(rows)), 1e-4) <= 1.0, "layernorm dgamma");
                GPU_CHECK(worst(down(dbet, dim), dbr, 1e-5 * rows, 1e-6) <= 1.0, "layernorm dbeta");
            }
}

void test_xent() {
    for (size_t rows : {size_t{1}, size_t{65}, size_t{513}})
        for (size_t V : {size_t{2}, size_t{1000}, size_t{50257}}) {
            const std::vector<float> logits = randv(rows * V, -10, 10, 11);
            std::vector<int64_t> t(rows);
            for (size_t r = 0; r < rows; ++r) t[r] = r % 5 == 4 ? -100 : static_cast<int64_t>((r * 7919) % V);
            DevBuf dl(logits.data(), logits.size() * 4), dt(t.data(), rows * 8), lse(logits.data(), rows * 4),
                loss(logits.data(), rows * 4), dlog(logits.data(), logits.size() * 4);
            double sum = 0;
            int64_t count = -1;
            GPU_OK(dsk_cuda_softmax_xent_fwd(dl.as<float>(), dt.d, DSK_I64, rows, V, -100, loss.as<float>(),
                                             lse.as<float>(), &sum, &count, nullptr));
            std::vector<double> ld = to_d(logits), lser(rows), dr(logits.size());
            const double sumr = dsk_ref_softmax_xent_fwd(ld.data(), t.data(), rows, V, -100, lser.data());
            int64_t want = 0;
            for (auto x : t) want += x != -100;
            GPU_CHECK(count == want, "xent count %lld vs %lld", static_cast<long long>(count), static_cast<long long>(want));
            GPU_CHECK(std::fabs(sum - sumr) <= 2e-5 * (1 + std::fabs(sumr)), "xent loss sum %.9g vs %.9g", sum, sumr);
            GPU_CHECK(worst(down(lse, rows), lser, 1e-5, 1e-6) <= 1.0, "xent lse rows %zu V %zu", rows, V);
            GPU_OK(dsk_cuda_softmax_xent_bwd(dl.as<float>(), dt.d, DSK_I64, lse.as<float>(), rows, V, -100, 0.5f,
                                             dlog.as<float>(), nullptr));
            dsk_ref_softmax_xent_bwd(ld.data(), t.data(), rows, V, -100, 0.5, dr.data());
            GPU_CHECK(worst(down(dlog, logits.size()), dr, 1e-7, 1e-5) <= 1.0, "xent dlogits rows %zu V %zu", rows, V);
        }
    // A bad target: reported with its row and value, nothing written.
    const std::vector<float> logits(4 * 3, 0.0f);
    const int32_t t[4] = {0, 2, 3, -1};
    DevBuf dl(logits.data(), logits.size() * 4), dt(t, sizeof t);
    double sum = 0;
    int64_t count = 0;
    const int rc = dsk_cuda_softmax_xent_fwd(dl.as<float>(), dt.d, DSK_I32, 4, 3, -100, nullptr, nullptr, &sum,
                                             &count, nullptr);
    GPU_CHECK(rc == DSK_ERR_INVALID_ARGUMENT && std::string(dsk_last_error()).find("targets[2] = 3") != std::string::npos,
              "bad target: rc %d, message '%s'", rc, dsk_last_error());
}

}  // namespace

int main() {
    if (const int rc = gput::require_device()) return rc;
    test_gelu_add();
    test_bias_grad();
    test_dropout();
    test_layernorm();
    test_xent();
    return gput::finish("gpu nn ops");
}

// The CUDA element-wise kernels and reductions on the device against
// kernels/ref: convert (every dtype pair, with rounding ties, fp16 overflow,
// subnormals, NaN, Inf), scale (the unscale) and axpy bit for bit; sumsq
// (and axpy_sumsq, stored values bitwise)
// equal bit for bit to the host emulation of its reduction order
// (kernels/elem/reduce_plan.h), identical on a second run, within n*2^-53
// of the reference's sequential sum, and non-finite reported; the overflow
// flag set by one Inf or NaN anywhere (fp32, fp16, bf16) and left alone otherwise.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "elem/reduce_plan.h"
#include "gpu_test_util.h"
#include "kernels.h"

using gput::DevBuf;

namespace {

size_t esize(int dt) { return dt == DSK_F32 ? 4 : 2; }

std::vector<float> values(size_t n, uint32_t seed) {
    std::mt19937 r(seed);
    std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
    std::vector<float> v(n);
    const uint32_t ties[] = {0x3F808000u, 0x3F818000u, 0xBF808000u, 0x7F7F8000u, 0x00018000u};
    for (size_t i = 0; i < n; ++i) {
        v[i] = u(r) * (i % 3 == 0 ? 1e-9f : 1.0f);
        if (i % 17 == 1) std::memcpy(&v[i], &ties[i % 5], 4);
        if (i % 251 == 2) v[i] = (i & 1) ? NAN : INFINITY;
        if (i % 253 == 3) v[i] = 65520.0f;
    }
    return v;
}

std::vector<uint8_t> encode(const std::vector<float>& v, int dt) {
    std::vector<uint8_t> b(v.size() * esize(dt));
    if (dt == DSK_F32)
        std::memcpy(b.data(), v.data(), b.size());
    else
        gput::ref_convert(v.data(), DSK_F32, b.data(), dt, v.size());
    return b;
}

void test_convert_scale_axpy() {
    const size_t n = 1000003;
    const std::vector<float> v = values(n, 7);
    const int dts[] = {DSK_F32, DSK_F16, DSK_BF16};
    for (int sd : dts)
        for (int dd : dts) {
            const std::vector<uint8_t> src = encode(v, sd);
            std::vector<uint8_t> want(n * esize(dd)), got(n * esize(dd));
            gput::ref_convert(src.data(), sd, want.data(), dd, n);
            DevBuf ds(src.data(), src.size()), dt(got.data(), got.size());
            GPU_OK(dsk_cuda_convert(ds.d, sd, dt.d, dd, n, nullptr));
            dt.download(got.data());
            GPU_CHECK(got == want, "convert %d -> %d differs from the reference", sd, dd);
        }
    for (int dt : dts)
        for (float s : {0.5f, 1.0f / 65536.0f, 3.0f}) {
            std::vector<uint8_t> x = encode(v, dt), got(x.size());
            DevBuf d(x.data(), x.size());
            GPU_OK(dsk_cuda_scale(d.d, dt, s, n, nullptr));
            d.download(got.data());
            dsk_ref_scale(x.data(), dt, s, n);
            GPU_CHECK(got == x, "scale dtype %d by %g differs", dt, s);
        }
    for (int dd : dts)
        for (int sd : dts) {
            std::vector<uint8_t> dst = encode(values(n, 9), dd), src = encode(v, sd), got(dst.size());
            DevBuf ddst(dst.data(), dst.size()), dsrc(src.data(), src.size());
            GPU_OK(dsk_cuda_axpy(ddst.d, dd, dsrc.d, sd, -0.75f, n, nullptr));
            ddst.download(got.data());
            dsk_ref_axpy(dst.data(), dd, src.data(), sd, -0.75f, n);
            GPU_CHECK(got == dst, "axpy dst %d src %d differs", dd, sd);
        }
}

void test_sumsq_overflow() {
    for (size_t n : {size_t{1}, size_t{1000}, size_t{262145}, size_t{50000017}}) {
        for (int dt : {DSK_F32, DSK_F16, DSK_BF16}) {
            std::mt19937 r(static_cast<uint32_t>(n));
            std::uniform_real_distribution<float> u(-3.0f, 3.0f);
            std::vector<float> v(n);
            for (auto& x : v) x = u(r);
            const std::vector<uint8_t> x = encode(v, dt);
            DevBuf d(x.data(), x.size());
            double s1 = -1, s2 = -2;
            int nf = -1;
            GPU_OK(dsk_cuda_sumsq(d.d, dt, n, &s1, &nf, nullptr));
            GPU_OK(dsk_cuda_sumsq(d.d, dt, n, &s2, nullptr, nullptr));
            const double emu = ds::kernels::red_emulate(n, [&](size_t i) {
                const double f = gput::ref_load(x.data(), dt, i);
                return f * f;
            });
            int rnf = -1;
            const double ref = dsk_ref_sumsq(x.data(), dt, n, &rnf);
            GPU_CHECK(std::memcmp(&s1, &emu, 8) == 0, "sumsq n=%zu dt=%d: %.17g, emulated order %.17g", n, dt, s1, emu);
            GPU_CHECK(std::memcmp(&s1, &s2, 8) == 0, "sumsq n=%zu: two runs differ", n);
            GPU_CHECK(std::fabs(s1 - ref) <= ref * 1.2e-16 * static_cast<double>(n), "sumsq n=%zu: %.17g vs %.17g",
                      n, s1, ref);
            GPU_CHECK(nf == 0, "sumsq n=%zu: finite data reported non-finite", n);

            // Fused axpy + sum of squares: stored values as the reference, sum in the emulated order.
            {
                std::vector<uint8_t> dst = x, got(x.size());
                DevBuf dd(dst.data(), dst.size()), ds(x.data(), x.size());
                double fs = -1;
                GPU_OK(dsk_cuda_axpy_sumsq(dd.d, dt, ds.d, dt, 0.5f, 0, n, &fs, nullptr, nullptr));
                dd.download(got.data());
                dsk_ref_axpy_sumsq(dst.data(), dt, x.data(), dt, 0.5f, 0, n, nullptr);
                GPU_CHECK(got == dst, "axpy_sumsq n=%zu dt=%d: stored values differ", n, dt);
                const double femu = ds::kernels::red_emulate(n, [&](size_t i) {
                    const double f = gput::ref_load(dst.data(), dt, i);
                    return f * f;
                });
                GPU_CHECK(std::memcmp(&fs, &femu, 8) == 0, "axpy_sumsq n=%zu dt=%d: %.17g vs emulated %.17g", n, dt,
                          fs, femu);
            }
            int zero = 0, flag = 0;
            DevBuf f(&zero, sizeof zero);
            GPU_OK(dsk_cuda_check_overflow(d.d, dt, n, f.as<int>(), nullptr));
            f.download(&flag);
            GPU_CHECK(flag == 0, "overflow flag set on finite data (n=%zu dt=%d)", n, dt);
            for (float bad : {INFINITY, NAN}) {
                std::vector<float> w = v;
                w[n - 1] = bad;
                const std::vector<uint8_t> y = encode(w, dt);
                DevBuf dy(y.data(), y.size()), fy(&zero, sizeof zero);
                GPU_OK(dsk_cuda_check_overflow(dy.d, dt, n, fy.as<int>(), nullptr));
                fy.download(&flag);
                GPU_CHECK(flag == 1, "overflow flag not set by %g at the end (n=%zu dt=%d)", bad, n, dt);
                GPU_OK(dsk_cuda_sumsq(dy.d, dt, n, &s1, &nf, nullptr));
                GPU_CHECK(nf == 1, "sumsq: %g not reported (n=%zu)", bad, n);
            }
        }
    }
}

}  // namespace

int main() {
    if (const int rc = gput::require_device()) return rc;
    test_convert_scale_axpy();
    test_sumsq_overflow();
    return gput::finish("gpu elementwise");
}

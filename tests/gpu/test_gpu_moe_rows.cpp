// The CUDA MoE row kernels (kernels/cuda/moe_rows.cu) on the device:
//  * rows_gather and rows_scatter_add equal the CPU kernels bit for bit
//    (one product and at most one add per element; --fmad=false), with and
//    without per-row scales, into a destination that already holds values;
//  * rows_dot (lanes striding over c, shuffled together: another order than
//    the CPU's) within fp32 summation error of the float64 dot:
//    |got - ref| <= C * 2^-23 * sum |a b| + 1e-30;
//  * the gate's Jitter (kernels/cuda/moe_jitter.cu): the factors drawn on the
//    device equal the CPU kernel's bit for bit, overwriting and accumulating,
//    with a key offset and a first index, over sizes around a Philox block.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "nn_moe.h"

using gput::DevBuf;
using gput::down;
using gput::randv;
using gput::same_bits;

namespace {

// n distinct rows of [0, S) (n <= S), shuffled.
std::vector<int32_t> distinct_rows(int64_t S, int64_t n, uint32_t seed) {
    std::vector<int32_t> v(static_cast<size_t>(S));
    for (int64_t i = 0; i < S; ++i) v[size_t(i)] = static_cast<int32_t>(i);
    std::mt19937 r(seed);
    std::shuffle(v.begin(), v.end(), r);
    v.resize(static_cast<size_t>(n));
    return v;
}

void test_rows() {
    struct Shape {
        int64_t S, C, n;
    };
    for (Shape s : {Shape{1, 1, 1}, Shape{37, 16, 20}, Shape{4096, 1024, 1500}, Shape{300, 4097, 300}}) {
        const std::vector<float> table = randv(size_t(s.S * s.C), -1, 1, 1), rows = randv(size_t(s.n * s.C), -1, 1, 2);
        const std::vector<float> scale = randv(size_t(s.n), 0, 1, 3);
        const std::vector<int32_t> idx = distinct_rows(s.S, s.n, 4);
        DevBuf dtable(table.data(), table.size() * 4), drows(rows.data(), rows.size() * 4),
            dscale(scale.data(), scale.size() * 4), didx(idx.data(), idx.size() * 4);
        for (const float* sc : {static_cast<const float*>(nullptr), scale.data()}) {
            const float* dsc = sc ? dscale.as<float>() : nullptr;
            // gather
            DevBuf dout(rows.data(), rows.size() * 4);
            GPU_OK(dsk_cuda_moe_rows_gather(dtable.as<float>(), s.S, s.C, didx.as<int32_t>(), dsc, s.n,
                                            dout.as<float>(), nullptr));
            std::vector<float> cpu(rows.size());
            GPU_OK(dsk_cpu_moe_rows_gather(table.data(), s.S, s.C, idx.data(), sc, s.n, cpu.data()));
            GPU_CHECK(same_bits(down(dout, cpu.size()), cpu), "gather S %lld C %lld n %lld%s differs from the CPU",
                      (long long)s.S, (long long)s.C, (long long)s.n, sc ? " scaled" : "");
            // scatter-add into a table that holds values
            DevBuf dacc(table.data(), table.size() * 4);
            GPU_OK(dsk_cuda_moe_rows_scatter_add(drows.as<float>(), s.n, s.C, didx.as<int32_t>(), dsc, s.S,
                                                 dacc.as<float>(), nullptr));
            std::vector<float> acc = table;
            GPU_OK(dsk_cpu_moe_rows_scatter_add(rows.data(), s.n, s.C, idx.data(), sc, s.S, acc.data()));
            GPU_CHECK(same_bits(down(dacc, acc.size()), acc), "scatter_add S %lld C %lld n %lld%s differs from the CPU",
                      (long long)s.S, (long long)s.C, (long long)s.n, sc ? " scaled" : "");
        }
        // row dots against float64
        DevBuf ddot(scale.data(), scale.size() * 4);
        GPU_OK(dsk_cuda_moe_rows_dot(dtable.as<float>(), s.S, s.C, didx.as<int32_t>(), drows.as<float>(), s.n,
                                     ddot.as<float>(), nullptr));
        const std::vector<float> got = down(ddot, size_t(s.n));
        for (int64_t j = 0; j < s.n; ++j) {
            double ref = 0.0, mag = 0.0;
            for (int64_t c = 0; c < s.C; ++c) {
                const double p = double(table[size_t(idx[size_t(j)] * s.C + c)]) * rows[size_t(j * s.C + c)];
                ref += p;
                mag += std::fabs(p);
            }
            const double tol = double(s.C) * std::ldexp(1.0, -23) * mag + 1e-30;
            GPU_CHECK(std::fabs(got[size_t(j)] - ref) <= tol, "dot row %lld (C %lld): %.9g vs %.17g", (long long)j,
                      (long long)s.C, double(got[size_t(j)]), ref);
        }
    }
}

void test_jitter() {
    dsk_dropout_key key{};
    key.seed = 0xfeedbeef12345678ull;
    key.stream = 11;
    key.module_id = 4;
    key.offset = 3;
    for (size_t n : {size_t{1}, size_t{5}, size_t{4096 * 1024 + 3}}) {
        const std::vector<float> src = randv(n, -2, 2, 5), acc0 = randv(n, -1, 1, 6);
        DevBuf dsrc(src.data(), n * 4);
        for (int accumulate : {0, 1}) {
            DevBuf ddst(acc0.data(), n * 4);
            GPU_OK(dsk_cuda_moe_jitter(dsrc.as<float>(), int64_t(n), &key, 96, accumulate, ddst.as<float>(), nullptr));
            std::vector<float> cpu = acc0;
            GPU_OK(dsk_cpu_moe_jitter(src.data(), int64_t(n), &key, 96, accumulate, cpu.data()));
            GPU_CHECK(same_bits(down(ddst, n), cpu), "jitter n %zu accumulate %d differs from the CPU", n, accumulate);
        }
    }
}

}  // namespace

int main() {
    if (const int rc = gput::require_device()) return rc;
    test_rows();
    test_jitter();
    return gput::finish("test_gpu_moe_rows");
}

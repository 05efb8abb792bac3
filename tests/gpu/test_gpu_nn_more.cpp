// The CUDA embedding, LayerNorm-backward-from-output and MSE kernels on the
// device:
//  * embedding forward and backward equal the CPU kernels bit for bit (the
//    backward sums each id's tokens in token order), with I32 and I64 ids,
//    long runs of one id, more rows than one grid dimension holds; a bad id
//    gives the CPU's bad_index and leaves out / dweight untouched;
//  * LayerNorm from the output equals the host emulation of its threads
//    (lno_emulate, ../../kernels/elem/layernorm_out.h) bit for bit, and the
//    float64 reference within the CPU kernel's tolerances; in place (dx = dy)
//    too; a zero gamma is reported with its index;
//  * MSE: the forward equals red_emulate of mse_term (the device's order) bit
//    for bit and the reference within 1e-12 relative; the backward equals the
//    CPU kernel bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "elem/layernorm_out.h"
#include "elem/mse.h"
#include "elem/reduce_plan.h"
#include "gpu_test_util.h"
#include "nn_embedding.h"
#include "nn_ops.h"

using gput::DevBuf;
using gput::randv;
using gput::down;
using gput::same_bits;

namespace {

double worst(const std::vector<float>& a, const std::vector<double>& b, double atol, double rtol) {
    double w = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double e = std::fabs(static_cast<double>(a[i]) - b[i]) / (atol + rtol * std::fabs(b[i]));
        if (!(e <= w)) w = e;
    }
    return w;
}

// n ids in [0, num) as I32 or I64 bytes; a third of them among the 4 smallest ids (long runs).
std::vector<char> make_ids(size_t n, int64_t num, int dt, uint32_t seed) {
    std::mt19937 r(seed);
    const size_t es = dt == DSK_I32 ? 4 : 8;
    std::vector<char> b(n * es + 8);
    for (size_t i = 0; i < n; ++i) {
        int64_t id = static_cast<int64_t>(r() % static_cast<uint32_t>(num));
        if (r() % 3 == 0) id %= 4 < num ? 4 : num;
        if (dt == DSK_I32) {
            const int32_t v = static_cast<int32_t>(id);
            std::memcpy(&b[i * es], &v, 4);
        } else {
            std::memcpy(&b[i * es], &id, 8);
        }
    }
    return b;
}

void set_id(std::vector<char>& b, int dt, size_t i, int64_t id) {
    if (dt == DSK_I32) {
        const int32_t v = static_cast<int32_t>(id);
        std::memcpy(&b[i * 4], &v, 4);
    } else {
        std::memcpy(&b[i * 8], &id, 8);
    }
}

void test_embedding() {
    struct Shape {
        size_t n, dim;
        int64_t num;
    };
    for (int dt : {DSK_I32, DSK_I64})
        for (Shape s : {Shape{1, 1, 1}, Shape{1000, 64, 7}, Shape{8192, 768, 50257}, Shape{70001, 16, 300},
                        Shape{3000, 1000, 3}}) {
            const std::vector<float> w = randv(s.num * s.dim, -1, 1, 1), dy = randv(s.n * s.dim, -1, 1, 2);
            std::vector<char> ids = make_ids(s.n, s.num, dt, 3);
            DevBuf dw(w.data(), w.size() * 4), dids(ids.data(), ids.size()), ddy(dy.data(), dy.size() * 4),
                dout(dy.data(), dy.size() * 4);
            const int64_t n = static_cast<int64_t>(s.n), dim = static_cast<int64_t>(s.dim);
            int64_t bad = 5;
            GPU_OK(dsk_cuda_embedding_fwd(dw.as<float>(), s.num, dim, dids.d, dt, n, dout.as<float>(), &bad, nullptr));
            GPU_CHECK(bad == -1, "fwd bad_index %lld", static_cast<long long>(bad));
            std::vector<float> cpu(s.n * s.dim);
            dsk_cpu_embedding_fwd(w.data(), s.num, dim, ids.data(), dt, n, cpu.data(), nullptr);
            GPU_CHECK(same_bits(down(dout, s.n * s.dim), cpu), "embedding fwd n %zu dim %zu differs from the CPU", s.n,
                      s.dim);
            // Backward into a dweight that already holds values.
            GPU_OK(dsk_cuda_embedding_bwd(ddy.as<float>(), dids.d, dt, n, s.num, dim, dw.as<float>(), &bad, nullptr));
            std::vector<float> cw = w;
            dsk_cpu_embedding_bwd(dy.data(), ids.data(), dt, n, s.num, dim, cw.data(), nullptr);
            GPU_CHECK(same_bits(down(dw, w.size()), cw), "embedding bwd n %zu dim %zu num %lld differs from the CPU",
                      s.n, s.dim, static_cast<long long>(s.num));
            // A bad id: reported at the first bad position, nothing written.
            if (s.n >= 1000) {
                set_id(ids, dt, 700, s.num);
                set_id(ids, dt, 900, -3);
                DevBuf bids(ids.data(), ids.size());
                const std::vector<float> before = down(dw, w.size()), out_before = down(dout, s.n * s.dim);
                GPU_CHECK(dsk_cuda_embedding_fwd(dw.as<float>(), s.num, dim, bids.d, dt, n, dout.as<float>(), &bad,
                                                 nullptr) == DSK_ERR_INVALID_ARGUMENT,
                          "fwd with a bad id");
                GPU_CHECK(bad == 700, "fwd bad_index %lld", static_cast<long long>(bad));
                const std::string want = "ids[700] = " + std::to_string(s.num) + " is outside [0, ";
                GPU_CHECK(std::string(dsk_last_error()).find(want) != std::string::npos, "message: %s", dsk_last_error());
                GPU_CHECK(dsk_cuda_embedding_bwd(ddy.as<float>(), bids.d, dt, n, s.num, dim, dw.as<float>(), &bad,
                                                 nullptr) == DSK_ERR_INVALID_ARGUMENT,
                          "bwd with a bad id");
                GPU_CHECK(bad == 700, "bwd bad_index %lld", static_cast<long long>(bad));
                GPU_CHECK(same_bits(down(dw, w.size()), before), "bwd wrote dweight despite a bad id");
                GPU_CHECK(same_bits(down(dout, s.n * s.dim), out_before), "fwd wrote out despite a bad id");
            }
        }
}

void test_layernorm_from_output() {
    for (size_t rows : {size_t{1}, size_t{7}, size_t{300}, size_t{600}})
        for (size_t dim : {size_t{1}, size_t{33}, size_t{768}, size_t{4100}})
            for (bool affine : {true, false}) {
                const size_t n = rows * dim;
                const std::vector<float> x = randv(n, -2, 5, 7), dy = randv(n, -1, 1, 10);
                std::vector<float> gm = randv(dim, 0.5f, 1.5f, 8), bt = randv(dim, -1, 1, 9);
                for (size_t j = 1; j < dim; j += 3) gm[j] = -gm[j];
                const float* g = affine ? gm.data() : nullptr;
                const float* b = affine ? bt.data() : nullptr;
                std::vector<float> y(n), mean(rows), rstd(rows);
                dsk_cpu_layernorm_fwd(x.data(), g, b, y.data(), mean.data(), rstd.data(), rows, dim, 1e-5f);
                const std::vector<float> dg0(dim, 0.25f), db0(dim, -0.5f);
                DevBuf ddy(dy.data(), n * 4), dyv(y.data(), n * 4), drs(rstd.data(), rows * 4), dgm(gm.data(), dim * 4),
                    dbt(bt.data(), dim * 4), ddx(dy.data(), n * 4), ddg(dg0.data(), dim * 4), ddb(db0.data(), dim * 4);
                GPU_OK(dsk_cuda_layernorm_bwd_from_output(ddy.as<float>(), dyv.as<float>(), drs.as<float>(),
                                                          affine ? dgm.as<float>() : nullptr,
                                                          affine ? dbt.as<float>() : nullptr, ddx.as<float>(),
                                                          ddg.as<float>(), ddb.as<float>(), rows, dim, nullptr));
                std::vector<float> ex(n), inv(dim), part(2 * ds::kernels::lno_groups(rows) * dim), eg = dg0, eb = db0;
                ds::kernels::lno_emulate(ds::kernels::LnoArgs{dy.data(), y.data(), rstd.data(), g, b, nullptr, ex.data(), dim},
                                         rows, inv.data(), part.data(), eg.data(), eb.data());
                const std::vector<float> gx = down(ddx, n), gg = down(ddg, dim), gb = down(ddb, dim);
                GPU_CHECK(same_bits(gx, ex) && same_bits(gg, eg) && same_bits(gb, eb),
                          "layernorm from output rows %zu dim %zu affine %d: differs from the emulated threads", rows,
                          dim, affine);
                std::vector<double> xd(x.begin(), x.end()), dyd(dy.begin(), dy.end()), gd(gm.begin(), gm.end()),
                    md(mean.begin(), mean.end()), rd(rstd.begin(), rstd.end()), dxr(n), dgr(dim, 0.25), dbr(dim, -0.5);
                dsk_ref_layernorm_bwd(dyd.data(), xd.data(), md.data(), rd.data(), affine ? gd.data() : nullptr,
                                      dxr.data(), dgr.data(), dbr.data(), rows, dim);
                if (dim > 1) GPU_CHECK(worst(gx, dxr, 2e-4, 1e-4) <= 1.0, "lno dx rows %zu dim %zu", rows, dim);
                GPU_CHECK(worst(gg, dgr, 1e-4 * std::sqrt(double(rows)), 1e-4) <= 1.0, "lno dgamma rows %zu dim %zu",
                          rows, dim);
                GPU_CHECK(worst(gb, dbr, 1e-5 * rows, 1e-6) <= 1.0, "lno dbeta rows %zu dim %zu", rows, dim);
                // In place: dx = dy.
                DevBuf io(dy.data(), n * 4), dg2(dg0.data(), dim * 4), db2(db0.data(), dim * 4);
                GPU_OK(dsk_cuda_layernorm_bwd_from_output(io.as<float>(), dyv.as<float>(), drs.as<float>(),
                                                          affine ? dgm.as<float>() : nullptr,
                                                          affine ? dbt.as<float>() : nullptr, io.as<float>(),
                                                          dg2.as<float>(), db2.as<float>(), rows, dim, nullptr));
                GPU_CHECK(same_bits(down(io, n), ex) && same_bits(down(dg2, dim), eg), "lno in place rows %zu dim %zu",
                          rows, dim);
            }
    // A zero gamma: its index, nothing written.
    std::vector<float> gm(40, 1.0f), v(80, 0.5f), rs(2, 1.0f);
    gm[17] = 0.0f;
    gm[30] = 0.0f;
    DevBuf dgm(gm.data(), 160), dv(v.data(), 320), drs(rs.data(), 8), dx(v.data(), 320), dg(gm.data(), 160),
        db(gm.data(), 160);
    GPU_CHECK(dsk_cuda_layernorm_bwd_from_output(dv.as<float>(), dv.as<float>(), drs.as<float>(), dgm.as<float>(),
                                                 dgm.as<float>(), dx.as<float>(), dg.as<float>(), db.as<float>(), 2,
                                                 40, nullptr) == DSK_ERR_INVALID_ARGUMENT,
              "zero gamma accepted");
    GPU_CHECK(std::string(dsk_last_error()).find("gamma[17] = 0") != std::string::npos, "message: %s",
              dsk_last_error());
    GPU_CHECK(same_bits(down(dx, 80), v) && same_bits(down(dg, 40), gm), "written despite a zero gamma");
}

void test_mse() {
    for (size_t n : {size_t{1}, size_t{1000}, (size_t{1} << 22) + 3}) {
        const std::vector<float> p = randv(n, -3, 3, 11), t = randv(n, -3, 3, 12);
        DevBuf dp(p.data(), n * 4), dt(t.data(), n * 4), dg(p.data(), n * 4);
        double s = -1.0;
        GPU_OK(dsk_cuda_mse_fwd(dp.as<float>(), dt.as<float>(), n, &s, nullptr));
        const double emu = ds::kernels::red_emulate(n, [&](size_t i) { return ds::kernels::mse_term(p.data(), t.data(), i); });
        GPU_CHECK(s == emu, "mse fwd n %zu: %.17g vs the emulated order %.17g", n, s, emu);
        const std::vector<double> pd(p.begin(), p.end()), td(t.begin(), t.end());
        const double ref = dsk_ref_mse_fwd(pd.data(), td.data(), n);
        GPU_CHECK(std::fabs(s - ref) <= 1e-12 * ref, "mse fwd n %zu: %.17g vs reference %.17g", n, s, ref);
        const float scale = 2.0f / static_cast<float>(n);
        GPU_OK(dsk_cuda_mse_bwd(dp.as<float>(), dt.as<float>(), n, scale, dg.as<float>(), nullptr));
        std::vector<float> gc(n);
        dsk_cpu_mse_bwd(p.data(), t.data(), n, scale, gc.data());
        GPU_CHECK(same_bits(down(dg, n), gc), "mse bwd n %zu differs from the CPU", n);
    }
}

}  // namespace

int main() {
    if (const int rc = gput::require_device()) return rc;
    test_embedding();
    test_layernorm_from_output();
    test_mse();
    return gput::finish("test_gpu_nn_more");
}

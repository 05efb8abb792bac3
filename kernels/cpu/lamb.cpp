// LAMB entry point: argument checks, pass 1 (norms) on the chosen ISA, the
// trust ratio (in baseline code, by the scalar reference's function, kernels/ref/lamb_trust.h), pass 2.
#include "../ref/lamb_trust.h"
#include "arg_check.h"
#include "isa_table.h"

using namespace ds::kernels;

extern "C" int dsk_cpu_lamb_step(float* p, const void* g, int g_dtype, float* m, float* v, void* w16,
                                 int w_dtype, size_t n, const dsk_lamb_hparams* h, float* trust_out) noexcept {
    ArgCheck k("dsk_lamb_step");
    k.hparams(h).dtype("g_dtype", g_dtype).w16(w16, w_dtype);
    if (k.ptr("p", p, n).ptr("g", g, n).ptr("m", m, n).ptr("v", v, n).failed()) return k.status();

    const LambConsts c = lamb_consts(*h);
    const LambArgs a{{p, g, g_dtype, w16, w_dtype, n}, m, v};
    const IsaKernels& isa = isa_kernels();

    double p_sq = 0.0, u_sq = 0.0;
    if (n > 0) isa.lamb_norms(a, c, &p_sq, &u_sq);
    const float trust = dsk_lamb_trust(p_sq, u_sq, h);
    if (n > 0) isa.lamb_apply(a, c, dsk_lamb_coef(trust, h));
    if (trust_out) *trust_out = trust;
    return DSK_OK;
}

// Lion entry point: argument checks and constants; the body runs on the
// chosen ISA (isa_table.h).
#include "arg_check.h"
#include "isa_table.h"

using namespace ds::kernels;

extern "C" int dsk_cpu_lion_step(float* p, const void* g, int g_dtype, float* m, void* w16, int w_dtype,
                                 size_t n, const dsk_lion_hparams* h) noexcept {
    ArgCheck k("dsk_lion_step");
    k.hparams(h).dtype("g_dtype", g_dtype).w16(w16, w_dtype);
    if (k.ptr("p", p, n).ptr("g", g, n).ptr("m", m, n).failed()) return k.status();
    if (n == 0) return DSK_OK;

    isa_kernels().lion_step(LionArgs{{p, g, g_dtype, w16, w_dtype, n}, m}, lion_consts(*h));
    return DSK_OK;
}

// Adam/AdamW entry point: argument checks and the per-step constants
// (computed here, in baseline code, exactly as the reference forms them);
// the body runs on the chosen ISA (isa_table.h).
#include "arg_check.h"
#include "isa_table.h"

using namespace ds::kernels;

extern "C" int dsk_cpu_adam_step(float* p, const void* g, int g_dtype, void* m, void* v, int state_dtype,
                                 void* w16, int w_dtype, size_t n, const dsk_adam_hparams* h) noexcept {
    ArgCheck k("dsk_adam_step");
    k.hparams(h).dtype("g_dtype", g_dtype).dtype("state_dtype", state_dtype).w16(w16, w_dtype);
    if (k.ptr("p", p, n).ptr("g", g, n).ptr("m", m, n).ptr("v", v, n).failed()) return k.status();
    if (n == 0) return DSK_OK;

    isa_kernels().adam_step(AdamArgs{{p, g, g_dtype, w16, w_dtype, n}, m, v, state_dtype}, adam_consts(*h));
    return DSK_OK;
}

// SGD entry point: argument checks and constants; the body runs on the
// chosen ISA (isa_table.h).
#include "arg_check.h"
#include "isa_table.h"

using namespace ds::kernels;

extern "C" int dsk_cpu_sgd_step(float* p, const void* g, int g_dtype, float* buf, void* w16, int w_dtype,
                                size_t n, const dsk_sgd_hparams* h) noexcept {
    ArgCheck k("dsk_sgd_step");
    k.hparams(h).dtype("g_dtype", g_dtype).w16(w16, w_dtype).ptr("p", p, n).ptr("g", g, n);
    if (!k.failed() && h->momentum != 0.0f) k.ptr("buf (momentum != 0)", buf, n);
    if (k.failed()) return k.status();
    if (n == 0) return DSK_OK;

    isa_kernels().sgd_step(SgdArgs{{p, g, g_dtype, w16, w_dtype, n}, buf}, sgd_consts(*h));
    return DSK_OK;
}

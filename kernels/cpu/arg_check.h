// Argument checks of the CPU entry points (baseline code only). A failed
// check records "<kernel>: <what was wrong>" for dsk_last_error() and the
// entry point returns the status; nothing throws. Checks chain and only the
// first failure counts, so each kernel states its checks in one expression:
//   ArgCheck k("dsk_sgd_step");
//   if (k.hparams(h).dtype("g_dtype", g_dtype).ptr("p", p, n).failed()) return k.status();
#pragma once

#include <cstddef>

#include "../elem/kernel_args.h"
#include "../elem/step_consts.h"
#include "kernels.h"

namespace ds::kernels {

class ArgCheck {
public:
    explicit ArgCheck(const char* kernel) : kernel_(kernel) {}

    // dtype is DSK_F32, DSK_F16 or DSK_BF16.
    ArgCheck& dtype(const char* arg, int dtype);
    // p is not NULL unless n == 0.
    ArgCheck& ptr(const char* arg, const void* p, size_t n);
    // The optional 16-bit copy of the updated weights: NULL, or F16/BF16.
    ArgCheck& w16(const void* w16, int w_dtype);
    ArgCheck& hparams(const void* h);

    bool failed() const { return status_ != DSK_OK; }
    int status() const { return status_; }

private:
    void fail(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

    const char* kernel_;
    int status_ = DSK_OK;
};

// Records a message for dsk_last_error(); returns status.
int set_last_error(int status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace ds::kernels

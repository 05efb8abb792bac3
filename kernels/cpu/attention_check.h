// The argument rules of nn_attention.h, shared by the CPU entry points and
// their CUDA twins (kernels/cuda/attention.cu) so that both refuse the same
// arguments with the same messages (each names its kernel). Host code only;
// no CUDA call.
#pragma once

#include "nn_attention.h"

namespace ds::kernels::attention {

// DSK_OK, or records the failure (dsk_last_error(), naming `kernel`) and
// returns DSK_ERR_INVALID_ARGUMENT: args NULL; batch, seq, channels or heads
// below 1; channels not a multiple of heads; dropout_p outside [0, 1);
// causal or bf16_products not 0 or 1; B*T*3C or B*H*T*T above INT64_MAX / 4.
int check_args(const char* kernel, const dsk_attention_args* a);

}  // namespace ds::kernels::attention

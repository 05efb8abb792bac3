// The kernel bodies for AVX2 + FMA + F16C (this file is compiled with those flags).
#define DSK_ISA_TABLE_INSTANTIATE
#include "simd_avx2.h"
#include "isa_table.h"

const ds::kernels::IsaKernels ds::kernels::kAvx2Kernels = make_isa_kernels<Avx2Ops>();

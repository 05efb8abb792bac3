// The kernel bodies for AVX-512 F/BW/VL/DQ (this file is compiled with those flags).
#define DSK_ISA_TABLE_INSTANTIATE
#include "simd_avx512.h"
#include "isa_table.h"

const ds::kernels::IsaKernels ds::kernels::kAvx512Kernels = make_isa_kernels<Avx512Ops>();

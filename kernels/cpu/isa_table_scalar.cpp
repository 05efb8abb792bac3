// The kernel bodies at width 1 (baseline ISA): the fallback and DS_CPU_ISA=scalar.
#define DSK_ISA_TABLE_INSTANTIATE
#define DSK_FORCE_INLINE_SCALAR  // see simd_scalar.h
#include "../elem/simd_scalar.h"
#include "isa_table.h"

const ds::kernels::IsaKernels ds::kernels::kScalarKernels = make_isa_kernels<ScalarOps>();

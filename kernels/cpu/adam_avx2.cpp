// AVX2 instantiation of the fused Adam kernel (adam_body.h).
#include "simd_avx2.h"
#include "adam_body.h"

namespace ds::kernels::avx2 {

void adam_step(const AdamArgs& a, const AdamConsts& c) { adam_run<Avx2Ops>(a, c); }

}  // namespace ds::kernels::avx2

// AVX-512 instantiation of the fused Adam kernel (adam_body.h).
#include "simd_avx512.h"
#include "adam_body.h"

namespace ds::kernels::avx512 {

void adam_step(const AdamArgs& a, const AdamConsts& c) { adam_run<Avx512Ops>(a, c); }

}  // namespace ds::kernels::avx512

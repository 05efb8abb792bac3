// AVX2 instantiation of the Lion kernel (lion_body.h).
#include "simd_avx2.h"
#include "lion_body.h"

namespace ds::kernels::avx2 {

void lion_step(const LionArgs& a, const LionConsts& c) { lion_run<Avx2Ops>(a, c); }

}  // namespace ds::kernels::avx2

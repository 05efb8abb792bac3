// AVX-512 instantiation of the Lion kernel (lion_body.h).
#include "simd_avx512.h"
#include "lion_body.h"

namespace ds::kernels::avx512 {

void lion_step(const LionArgs& a, const LionConsts& c) { lion_run<Avx512Ops>(a, c); }

}  // namespace ds::kernels::avx512

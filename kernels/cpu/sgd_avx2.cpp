// AVX2 instantiation of the SGD kernel (sgd_body.h).
#include "simd_avx2.h"
#include "sgd_body.h"

namespace ds::kernels::avx2 {

void sgd_step(const SgdArgs& a, const SgdConsts& c) { sgd_run<Avx2Ops>(a, c); }

}  // namespace ds::kernels::avx2

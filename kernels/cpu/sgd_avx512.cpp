// AVX-512 instantiation of the SGD kernel (sgd_body.h).
#include "simd_avx512.h"
#include "sgd_body.h"

namespace ds::kernels::avx512 {

void sgd_step(const SgdArgs& a, const SgdConsts& c) { sgd_run<Avx512Ops>(a, c); }

}  // namespace ds::kernels::avx512

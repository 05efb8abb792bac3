// AVX2 instantiation of the LAMB kernels (lamb_body.h).
#include "simd_avx2.h"
#include "lamb_body.h"

namespace ds::kernels::avx2 {

void lamb_norms(const LambArgs& a, const LambConsts& c, double* p_sq, double* u_sq) {
    lamb_norms_run<Avx2Ops>(a, c, p_sq, u_sq);
}

void lamb_apply(const LambArgs& a, const LambConsts& c, float coef) { lamb_apply_run<Avx2Ops>(a, c, coef); }

}  // namespace ds::kernels::avx2

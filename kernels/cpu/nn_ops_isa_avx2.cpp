// The nn kernels' loops for AVX2 + FMA (this file is compiled with those flags).
#include "nn_ops_body.h"

const ds::kernels::NnIsaOps ds::kernels::kNnAvx2Ops = make_nn_isa_ops();

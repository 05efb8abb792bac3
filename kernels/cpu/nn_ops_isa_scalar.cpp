// The nn kernels' loops for baseline (SSE2) code.
#include "nn_ops_body.h"

const ds::kernels::NnIsaOps ds::kernels::kNnScalarOps = make_nn_isa_ops();

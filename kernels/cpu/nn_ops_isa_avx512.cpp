// The nn kernels' loops for AVX-512 F/BW/VL/DQ (this file is compiled with those flags).
#include "nn_ops_body.h"

const ds::kernels::NnIsaOps ds::kernels::kNnAvx512Ops = make_nn_isa_ops();

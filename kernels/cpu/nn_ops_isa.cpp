// nn_isa_ops(): the nn kernels' loops for the ISA in use.
#include "nn_ops_isa.h"

namespace ds::kernels {

const NnIsaOps& nn_isa_ops() {
    switch (dsk_cpu_isa()) {
    case DSK_ISA_AVX512: return kNnAvx512Ops;
    case DSK_ISA_AVX2: return kNnAvx2Ops;
    default: return kNnScalarOps;
    }
}

}  // namespace ds::kernels

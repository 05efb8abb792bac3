#include "engine/norm_across.h"

#include <cstdint>
#include <vector>

namespace ds {

std::function<void(double* sumsq, bool* overflow)> norm_sum_over(std::shared_ptr<comm::Communicator> c) {
    return [c](double* sumsq, bool* overflow) {
        std::vector<double> all(static_cast<size_t>(c->size()));
        c->allgather(sumsq, all.data(), sizeof(double), DType::U8);
        double total = 0.0;
        for (double v : all) total += v;
        int64_t o = *overflow ? 1 : 0;
        c->allreduce(&o, &o, 1, DType::I64, comm::Op::Max);
        *sumsq = total;
        *overflow = o != 0;
    };
}

}  // namespace ds

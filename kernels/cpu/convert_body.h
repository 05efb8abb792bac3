// dtype conversion on the CPU: the body (../elem/convert.h) over the chunks.
#pragma once

#include "parallel_chunks.h"
#include "../elem/convert.h"
#include "../elem/simd_dtype.h"
#include "simd_loop.h"

namespace {

template <class V>
void convert_run(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n) {
    with_dtype(src_dtype, [&](auto sd) {
        with_dtype(dst_dtype, [&](auto dd) {
            const ConvertBody<decltype(sd)::value, decltype(dd)::value> body{src, dst};
            run_chunks(n, unroll_elems<V>(),
                       [&](size_t lo, size_t hi, int) { vector_loop<V>(lo, hi, body); });
        });
    });
}

}  // namespace

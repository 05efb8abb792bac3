// Where element j of tensor-parallel rank r's shard (of N) of a GPT
// parameter sits in the unsplit parameter (row-major), by Megatron's split
// (nn/tp_transformer.h): the fused qkv's q, k and v blocks of C rows each
// give every rank H/N whole heads; c_fc gives a block of rows; both c_proj
// weights a block of input columns; everything else is whole. The MPI tests
// compare a shard with the matching block of a one-process run through it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ds_mpi_test {

inline int64_t tp_full_index(const std::string& name, const std::vector<int64_t>& full, int64_t C, int64_t j,
                             int r, int N) {
    auto ends_with = [&](const char* tail) {
        const size_t n = std::strlen(tail);
        return name.size() >= n && name.compare(name.size() - n, n, tail) == 0;
    };
    const int64_t cols = ends_with(".weight") ? full[1] : 1;
    const int64_t row = j / cols, col = j % cols;
    if (name.find("attn.c_attn.") != std::string::npos) {
        const int64_t per = C / N, block = row / per;
        return (block * C + r * per + row % per) * cols + col;
    }
    if (name.find("mlp.c_fc.") != std::string::npos) return (r * (full[0] / N) + row) * cols + col;
    if (name.find("c_proj.weight") != std::string::npos) {
        const int64_t local_cols = full[1] / N;
        return (j / local_cols) * full[1] + r * local_cols + j % local_cols;
    }
    return j;
}

}  // namespace ds_mpi_test

// Scalar float64 reference for dropout (nn_ops.h): its own Philox4x32-10,
// written from the paper's definition, one element (and one whole block
// computation) at a time, so it shares no code with kernels/cpu/philox.h.
#include <cmath>

#include "nn_ops.h"

namespace {

void mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
    const uint64_t p = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
    *hi = static_cast<uint32_t>(p >> 32);
    *lo = static_cast<uint32_t>(p & 0xFFFFFFFFu);
}

void ref_philox(uint32_t ctr[4], uint32_t key[2]) {
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            key[0] += 0x9E3779B9u;
            key[1] += 0xBB67AE85u;
        }
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo(0xD2511F53u, ctr[0], &hi0, &lo0);
        mulhilo(0xCD9E8D57u, ctr[2], &hi1, &lo1);
        const uint32_t out[4] = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
        for (int i = 0; i < 4; ++i) ctr[i] = out[i];
    }
}

}  // namespace

extern "C" void dsk_ref_dropout_fwd(const double* x, double* y, size_t n, double p, const dsk_dropout_key* key) {
    for (size_t i = 0; i < n; ++i) {
        const uint64_t e = key->offset + i;
        const uint64_t block = e / 4;
        uint32_t ctr[4] = {static_cast<uint32_t>(block % 4294967296u), static_cast<uint32_t>(block / 4294967296u),
                           key->module_id, static_cast<uint32_t>(key->stream % 4294967296u)};
        uint32_t k[2] = {static_cast<uint32_t>(key->seed % 4294967296u) ^
                             static_cast<uint32_t>(key->stream / 4294967296u),
                         static_cast<uint32_t>(key->seed / 4294967296u)};
        ref_philox(ctr, k);
        const double u = static_cast<double>(ctr[e % 4]);
        // keep when u >= round(p * 2^32)
        const bool keep = p < 1.0 && u >= std::nearbyint(p * 4294967296.0);
        y[i] = x[i] * (keep ? 1.0 / (1.0 - p) : 0.0);
    }
}

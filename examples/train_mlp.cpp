/*
 * train_mlp.cpp — the C++ twin of train_mlp.c, through include/deepspeed_c.hpp.
 *
 * Same task, config, options and verdict as train_mlp.c: regress a fixed
 * random "teacher" MLP; the program owns forward and backward, the engine
 * owns precision, loss scale, gradient averaging, clipping, AdamW and the LR
 * schedule. Exit 1 if the mean loss of the last tenth of the run is not 10%
 * below the first tenth's (runs under 40 micro-steps are too short to judge:
 * exit 0); exit 2 on a bad option or a library error (ds::Error, printed).
 *
 *   train_mlp_cpp [--dtype fp32|fp16|bf16] [--zero 0|1|2|3] [--steps N] [--config FILE] [--quiet]
 *
 * What the wrapper changes against the C version: RAII instead of
 * destroy calls, exceptions instead of status checks, typed views, and
 * View::to_floats() (the library's own fp16/bf16 casts) instead of
 * hand-written conversions.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "deepspeed_c.hpp"

namespace {

constexpr int IN = 64, HID = 128, OUT = 16, MICRO = 32;

std::string make_config(const std::string& dtype, int zero) {
    return std::string("{\n") +
           "  \"train_micro_batch_size_per_gpu\": 32,\n"
           "  \"gradient_accumulation_steps\": 2,\n"
           "  \"gradient_clipping\": 1.0,\n"
           "  \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003, \"weight_decay\": 0.01}},\n"
           "  \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 20, \"warmup_type\": \"linear\"}},\n"
           "  \"fp16\": {\"enabled\": " + (dtype == "fp16" ? "true" : "false") + ", \"initial_scale_power\": 12},\n"
           "  \"bf16\": {\"enabled\": " + (dtype == "bf16" ? "true" : "false") + "},\n"
           "  \"zero_optimization\": {\"stage\": " + std::to_string(zero < 0 ? 0 : zero) +
           (zero == 3 ? ", \"stage3_param_persistence_threshold\": 0" : "") + "}\n}\n";
}

/* xorshift64* uniform in [-1, 1) (the same stream as train_mlp.c) */
float urand(uint64_t& s) {
    s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
    return static_cast<float>((s * 2685821657736338717ull) >> 40) / static_cast<float>(1 << 23) - 1.0f;
}

/* C[m x n] = op(A) op(B), row-major; op = transpose when ta/tb is set. */
void gemm(bool ta, bool tb, int m, int n, int k, const float* A, const float* B, float* C) {
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (int p = 0; p < k; ++p)
                acc += (ta ? A[p * m + i] : A[i * k + p]) * (tb ? B[j * k + p] : B[p * n + j]);
            C[i * n + j] = acc;
        }
}

struct Mlp {
    std::vector<float> w1 = std::vector<float>(HID * IN), b1 = std::vector<float>(HID),
                       w2 = std::vector<float>(OUT * HID), b2 = std::vector<float>(OUT);
};

/* y = tanh(x W1^T + b1) W2^T + b2 for MICRO rows; h keeps the hidden activations. */
void forward(const float* x, const Mlp& m, float* h, float* y) {
    gemm(false, true, MICRO, HID, IN, x, m.w1.data(), h);
    for (int i = 0; i < MICRO; ++i)
        for (int j = 0; j < HID; ++j) h[i * HID + j] = std::tanh(h[i * HID + j] + m.b1[j]);
    gemm(false, true, MICRO, OUT, HID, h, m.w2.data(), y);
    for (int i = 0; i < MICRO; ++i)
        for (int j = 0; j < OUT; ++j) y[i * OUT + j] += m.b2[j];
}

/* The engine's working weights (fp32, fp16 or bf16) widened to fp32. */
std::vector<float> weights(ds::Engine& e, const char* name, DLDataType working) {
    if (working.bits == 32) {
        ds::View<const float> v = e.param<float>(name);
        return std::vector<float>(v.begin(), v.end());
    }
    if (working.code == kDLBfloat) return e.param<ds::bfloat16>(name).to_floats();
    return e.param<ds::half>(name).to_floats();
}

int usage(const char* argv0) {
    std::fprintf(stderr, "usage: %s [--dtype fp32|fp16|bf16] [--zero 0|1|2|3] [--steps N] [--config FILE] [--quiet]\n",
                 argv0);
    return 2;
}

int run(int argc, char** argv) {
    std::string dtype = "fp32";
    const char* config_path = nullptr;
    int steps = 300, zero = -1;
    bool quiet = false;
    for (int a = 1; a < argc; ++a) {
        if (!std::strcmp(argv[a], "--dtype") && a + 1 < argc) dtype = argv[++a];
        else if (!std::strcmp(argv[a], "--steps") && a + 1 < argc) steps = std::atoi(argv[++a]);
        else if (!std::strcmp(argv[a], "--zero") && a + 1 < argc) zero = std::atoi(argv[++a]);
        else if (!std::strcmp(argv[a], "--config") && a + 1 < argc) config_path = argv[++a];
        else if (!std::strcmp(argv[a], "--quiet")) quiet = true;
        else return usage(argv[0]);
    }
    if (dtype != "fp32" && dtype != "fp16" && dtype != "bf16") {
        std::fprintf(stderr, "--dtype must be fp32, fp16 or bf16\n");
        return 2;
    }
    if (zero != -1 && (zero < 0 || zero > 3)) {
        std::fprintf(stderr, "--zero must be 0, 1, 2 or 3\n");
        return 2;
    }
    if (zero != -1 && config_path) {
        std::fprintf(stderr, "--zero sets the embedded config's ZeRO stage: set zero_optimization.stage in %s instead\n",
                     config_path);
        return 2;
    }

    // The world this process was started in, kept to finalize it collectively at the end.
    ds::Comm comm = ds::Comm::world();
    ds::EngineOptions opts;
    opts.comm = &comm;
    ds::Engine engine = config_path ? ds::Engine::from_file(config_path, std::move(opts))
                                    : ds::Engine(make_config(dtype, zero), std::move(opts));
    const int32_t rank = engine.rank(), world = engine.world_size();
    if (rank == 0)
        std::printf("deepspeed_c %s (C++ wrapper), %s training, %d rank(s), build %s\n",
                    std::string(ds::version_string()).c_str(), dtype.c_str(), int(world),
                    std::string(ds::build_info()).c_str());

    uint64_t init_rng = 0x9E3779B97F4A7C15ull;  // same init on every rank
    Mlp student, teacher;
    for (int i = 0; i < HID * IN; ++i) {
        student.w1[i] = urand(init_rng) / std::sqrt(float(IN));
        teacher.w1[i] = 2.0f * urand(init_rng) / std::sqrt(float(IN));
    }
    for (int i = 0; i < OUT * HID; ++i) {
        student.w2[i] = urand(init_rng) / std::sqrt(float(HID));
        teacher.w2[i] = 2.0f * urand(init_rng) / std::sqrt(float(HID));
    }
    for (int i = 0; i < HID; ++i) teacher.b1[i] = 0.1f * urand(init_rng);
    for (int i = 0; i < OUT; ++i) teacher.b2[i] = 0.1f * urand(init_rng);
    uint64_t data_rng = 0xD1B54A32D192ED03ull ^ (uint64_t(rank + 1) * 0x9E3779B97F4A7C15ull);
    if (data_rng == 0) data_rng = 1;

    engine.add_param("fc1.weight", {student.w1, {HID, IN}});
    engine.add_param("fc1.bias", {student.b1, {HID}});
    engine.add_param("fc2.weight", {student.w2, {OUT, HID}});
    engine.add_param("fc2.bias", {student.b2, {OUT}});
    engine.init();
    const DLDataType working = engine.param_info(0).dtype;
    const std::vector<std::string> names{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};

    std::vector<float> x(MICRO * IN), h(MICRO * HID), y(MICRO * OUT), t(MICRO * OUT), th(MICRO * HID);
    std::vector<float> dy(MICRO * OUT), dh(MICRO * HID);
    Mlp grad;
    const int window = steps / 10 < 5 ? 5 : steps / 10;
    double head_sum = 0, tail_sum = 0;
    float smoothed = 0;
    for (int step = 0; step < steps; ++step) {
        // working weights, gathered at ZeRO-3 for the copy (elsewhere gather only checks the names)
        engine.gather(names);
        student.w1 = weights(engine, "fc1.weight", working);
        student.b1 = weights(engine, "fc1.bias", working);
        student.w2 = weights(engine, "fc2.weight", working);
        student.b2 = weights(engine, "fc2.bias", working);
        engine.release(names);

        for (float& v : x) v = urand(data_rng);
        forward(x.data(), teacher, th.data(), t.data());
        forward(x.data(), student, h.data(), y.data());

        const float scale = engine.loss_multiplier();  // loss scale / gradient_accumulation_steps
        float mse = 0;
        for (int i = 0; i < MICRO * OUT; ++i) {
            const float d = y[i] - t[i];
            mse += d * d;
            dy[i] = scale * 2.0f * d / float(MICRO * OUT);
        }
        mse /= float(MICRO * OUT);
        gemm(true, false, OUT, HID, MICRO, dy.data(), h.data(), grad.w2.data());
        for (int j = 0; j < OUT; ++j) {
            grad.b2[j] = 0;
            for (int i = 0; i < MICRO; ++i) grad.b2[j] += dy[i * OUT + j];
        }
        gemm(false, false, MICRO, HID, OUT, dy.data(), student.w2.data(), dh.data());
        for (int i = 0; i < MICRO * HID; ++i) dh[i] *= 1.0f - h[i] * h[i];
        gemm(true, false, HID, IN, MICRO, dh.data(), x.data(), grad.w1.data());
        for (int j = 0; j < HID; ++j) {
            grad.b1[j] = 0;
            for (int i = 0; i < MICRO; ++i) grad.b1[j] += dh[i * HID + j];
        }
        engine.accumulate_grad("fc1.weight", grad.w1, {HID, IN}, ds::Grad::predivided);
        engine.accumulate_grad("fc1.bias", grad.b1, {HID}, ds::Grad::predivided);
        engine.accumulate_grad("fc2.weight", grad.w2, {OUT, HID}, ds::Grad::predivided);
        engine.accumulate_grad("fc2.bias", grad.b2, {OUT}, ds::Grad::predivided);
        engine.backward();
        const ds::StepInfo info = engine.step();

        smoothed = step == 0 ? mse : 0.9f * smoothed + 0.1f * mse;
        if (step < window) head_sum += mse;
        if (step >= steps - window) tail_sum += mse;
        if (!quiet && rank == 0 && info.stepped && (info.global_step % 10 == 0 || info.skipped))
            std::printf("step %4lld  loss %.5f  lr %.2e  grad_norm %.4f  loss_scale %g%s\n",
                        static_cast<long long>(info.global_step), smoothed, info.lr, info.grad_norm,
                        double(info.loss_scale), info.skipped ? "  (skipped: overflow)" : "");
    }
    if (world > 1) std::printf("rank %d: ", int(rank));
    int verdict = 0;
    if (steps < 40) {
        const int n = steps < window ? (steps ? steps : 1) : window;
        std::printf("%d steps: too short to judge whether the loss fell (the LR warms up over the first 40; "
                    "mean loss of the first %d steps %.5f, of the last %d %.5f)\n",
                    steps, n, head_sum / n, n, tail_sum / n);
    } else {
        const double head = head_sum / window, tail = tail_sum / window;
        verdict = tail < 0.9 * head ? 0 : 1;
        std::printf("mean loss of the first %d steps %.5f, of the last %d steps %.5f: %s (x%.2f)\n", window, head,
                    window, tail, verdict == 0 ? "fell" : "DID NOT FALL", head / (tail > 0 ? tail : 1e-30));
    }
    engine = ds::Engine();  // destroy the engine before the collective teardown
    comm.finalize();        // every rank gets here
    return verdict;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const ds::Error& e) {
        std::fprintf(stderr, "deepspeed_c error (%s):\n  %s\n", std::string(ds::status_string(e.status())).c_str(),
                     e.what());
        return 2;
    }
}

/*
 * deepspeed_c.hpp — a header-only C++17 wrapper over the C ABI (deepspeed_c.h).
 *
 * It adds RAII, exceptions and typed views, nothing else: every method is one
 * (or a few) ds_* calls, and the rules of deepspeed_c.h hold unchanged
 * (threads, collectives, view lifetimes). It uses only the public C header,
 * so it cannot drift from the ABI: a changed C signature breaks its build.
 * The value types (Error, Span, TensorRef, View) are in deepspeed_c_types.hpp,
 * which this header includes; handles and library functions are here.
 *
 * Namespace. Everything lives in `deepspeed_c`; `ds` is a namespace alias for
 * it (ds::Engine, ds::Error). The library's own sources use a namespace `ds`
 * of their own; a translation unit that sees both (a program that includes
 * library internals) defines DEEPSPEED_C_HPP_NO_DS_ALIAS and writes
 * deepspeed_c::Engine. The clash can never be silent: the alias and a
 * namespace of the same name are a compile error, and the classes here are
 * mangled as deepspeed_c::*, distinct from any internal ds::* symbol.
 *
 * Errors. A failing ds_* call throws ds::Error: status() is the C status,
 * what() the text of ds_last_error() (it names the key path, argument,
 * parameter, file or rank). Arguments the wrapper checks itself (a name with
 * a NUL byte, a data span that does not match its shape, a view of another
 * dtype than asked for) throw ds::Error with DS_ERR_INVALID_ARGUMENT before
 * anything reaches the library. After an exception the engine is usable, as
 * after a failing C call.
 *
 * Views. Engine::param<T>() and grad<T>() return ds::View<T>: a typed span
 * over engine-owned memory (data, size, shape, strides, operator[],
 * begin/end). A view is valid exactly as long as the C header says for
 * ds_engine_param_view: ZeRO 0-2 from init to the engine's destruction (the
 * values change only inside step, load_checkpoint and set_full_*; gradients
 * also in accumulate_grad and backward); ZeRO-3 partitioned parameters only
 * until the matching release(). A view never keeps the engine alive: do not
 * use it after the Engine is destroyed or moved-from-and-destroyed.
 *
 * Threads. An Engine is used by one thread at a time (the library detects a
 * violation and throws DS_ERR_INVALID_STATE); const getters may run together.
 */
#ifndef DEEPSPEED_C_HPP
#define DEEPSPEED_C_HPP

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepspeed_c.h"
#include "deepspeed_c_types.hpp"

namespace deepspeed_c {

// ---------------------------------------------------------------------------
// Library-level functions
// ---------------------------------------------------------------------------

inline uint32_t version() noexcept { return ds_version(); }
inline uint32_t abi_version() noexcept { return ds_abi_version(); }
inline std::string_view version_string() noexcept { return ds_version_string(); }
inline std::string_view build_info() noexcept { return ds_build_info(); }
inline std::string_view last_error() noexcept { return ds_last_error(); }

/** Throws DS_ERR_ABI_MISMATCH when the loaded library's ABI differs from this header's. */
inline void check_abi() {
    if (ds_abi_version() != DS_ABI_VERSION)
        detail::fail(Status::abi_mismatch, detail::cat("deepspeed_c.hpp: the loaded library has ABI ", ds_abi_version(),
                                                       ", this header was written for ", DS_ABI_VERSION));
}

enum class LogLevel : int32_t { off = DS_LOG_OFF, error = DS_LOG_ERROR, warn = DS_LOG_WARN, info = DS_LOG_INFO, debug = DS_LOG_DEBUG };

/** A log sink: the message is valid only during the call. It may run on any
 *  thread that is inside a ds_* call, or a communicator's watchdog; an
 *  exception it throws is caught and dropped (it must not cross into C). */
using LogFn = std::function<void(LogLevel, std::string_view)>;

namespace detail {
inline void log_trampoline(int32_t level, const char* message, void* user) noexcept {
    try {
        (*static_cast<LogFn*>(user))(static_cast<LogLevel>(level), message ? message : "");
    } catch (...) {  // never unwind into the library
    }
}
}  // namespace detail

/** ds_set_log_callback with a C++ callable; an empty fn restores the default
 *  (stderr). Every sink set is kept alive for the life of the process, never
 *  freed: the library lets a call already running in a replaced sink finish,
 *  and may log during exit (after static destructors ran), so freeing one
 *  would race or dangle. */
inline void set_log_callback(LogFn fn) {
    static std::mutex mu;
    static auto* sinks = new std::vector<std::unique_ptr<LogFn>>();  // intentionally never deleted
    std::lock_guard<std::mutex> lock(mu);
    if (!fn) { ds_set_log_callback(nullptr, nullptr); return; }
    sinks->push_back(std::make_unique<LogFn>(std::move(fn)));
    ds_set_log_callback(&detail::log_trampoline, sinks->back().get());
}

/** ZeRO memory estimators (bytes): cpu per node, gpu per GPU. */
struct MemEstimate { int64_t cpu_bytes = 0, gpu_bytes = 0, largest_layer_bytes = 0; };

inline MemEstimate estimate_zero2_mem(int64_t total_params, int32_t gpus_per_node, int32_t nodes, bool cpu_offload,
                                      double buffer_factor = 1.5) {
    MemEstimate m;
    detail::check(ds_estimate_zero2_mem(total_params, gpus_per_node, nodes, cpu_offload ? 1 : 0, buffer_factor,
                                        &m.cpu_bytes, &m.gpu_bytes));
    return m;
}
inline MemEstimate estimate_zero3_mem(int64_t total_params, int64_t largest_layer_params, int32_t gpus_per_node,
                                      int32_t nodes, bool cpu_offload, bool cpu_offload_params, bool zero_init,
                                      double buffer_factor = 1.5) {
    MemEstimate m;
    detail::check(ds_estimate_zero3_mem(total_params, largest_layer_params, gpus_per_node, nodes, cpu_offload ? 1 : 0,
                                        cpu_offload_params ? 1 : 0, zero_init ? 1 : 0, buffer_factor, &m.cpu_bytes,
                                        &m.gpu_bytes, &m.largest_layer_bytes));
    return m;
}

// ---------------------------------------------------------------------------
// Comm: RAII over ds_comm_t
// ---------------------------------------------------------------------------

enum class Backend : int32_t { automatic = DS_COMM_BACKEND_AUTO, local = DS_COMM_BACKEND_LOCAL,
                               mpi = DS_COMM_BACKEND_MPI, nccl = DS_COMM_BACKEND_NCCL };

/** ds_comm_options_t; DS_UNSET_I32 = take the environment or the default. */
struct CommOptions {
    int32_t timeout_ms = DS_UNSET_I32;
    int32_t debug = DS_UNSET_I32;
    Backend backend = Backend::automatic;
    int32_t device = DS_UNSET_I32;

    ds_comm_options_t to_c() const noexcept {
        ds_comm_options_t o;
        ds_comm_options_init(&o, sizeof o);
        o.timeout_ms = timeout_ms;
        o.debug = debug;
        o.backend = static_cast<int32_t>(backend);
        o.device = device;
        return o;
    }
};

/** The reduction of a collective (DS_REDUCE_*). */
enum class ReduceOp : int32_t { sum = DS_REDUCE_SUM, avg = DS_REDUCE_AVG, max = DS_REDUCE_MAX };

/** A communicator (move-only). The destructor is ds_comm_destroy (local);
 *  finalize() is the collective teardown. An engine keeps its communicator
 *  alive, so a Comm may die before the Engine that joined it. */
class Comm {
public:
    Comm() noexcept = default;
    /** Take ownership of a C handle. */
    explicit Comm(ds_comm_t* handle) noexcept : h_(handle) {}
    Comm(Comm&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    Comm& operator=(Comm&& o) noexcept {
        if (this != &o) { ds_comm_destroy(h_); h_ = std::exchange(o.h_, nullptr); }
        return *this;
    }
    Comm(const Comm&) = delete;
    Comm& operator=(const Comm&) = delete;
    ~Comm() { ds_comm_destroy(h_); }

    /** ds_comm_create_world: MPI_COMM_WORLD under a launcher, else a world of one. */
    static Comm world(const CommOptions& opts = {}) {
        ds_comm_options_t o = opts.to_c();
        ds_comm_t* h = nullptr;
        detail::check(ds_comm_create_world(&o, &h));
        return Comm(h);
    }
    /** ds_comm_create_mpi over MPI_Comm_c2f(host_comm). */
    static Comm from_mpi(int32_t mpi_comm_f, const CommOptions& opts = {}) {
        ds_comm_options_t o = opts.to_c();
        ds_comm_t* h = nullptr;
        detail::check(ds_comm_create_mpi(mpi_comm_f, &o, &h));
        return Comm(h);
    }

    int32_t rank() const { int32_t v = 0; detail::check(ds_comm_rank(h_, &v)); return v; }
    int32_t size() const { int32_t v = 0; detail::check(ds_comm_size(h_, &v)); return v; }
    Backend backend() const { int32_t v = 0; detail::check(ds_comm_backend(h_, &v)); return static_cast<Backend>(v); }
    void finalize() { detail::check(ds_comm_finalize(h_)); }
    void abort(std::string_view reason) {
        detail::check(ds_comm_abort(h_, detail::c_str(reason, "Comm::abort: reason").c_str()));
    }
    /** ds_comm_split (= MPI_Comm_split), collective over this communicator:
     *  ranks with the same color >= 0 form a new communicator ranked by key
     *  (ties: their rank here). A negative color joins none and returns an
     *  empty Comm (operator bool false). */
    Comm split(int32_t color, int32_t key = 0) const {
        ds_comm_t* h = nullptr;
        detail::check(ds_comm_split(h_, color, key, &h));
        return Comm(h);
    }

    // Collectives on host tensors (ds_comm_all_reduce, ...: deepspeed.comm's names and
    // rules), collective over this communicator.
    /** all_reduce(tensor, op): in place. */
    void all_reduce(TensorRef& tensor, ReduceOp op = ReduceOp::sum) const {
        detail::check(ds_comm_all_reduce(h_, tensor.get_mutable("Comm::all_reduce: tensor"), static_cast<int32_t>(op)));
    }
    void all_reduce(TensorRef&& tensor, ReduceOp op = ReduceOp::sum) const { all_reduce(tensor, op); }
    /** all_gather_into_tensor: output holds size() x input's elements, every rank's in rank order. */
    void all_gather_into_tensor(TensorRef& output, const TensorRef& input) const {
        detail::check(ds_comm_all_gather_into_tensor(h_, output.get_mutable("Comm::all_gather_into_tensor: output"),
                                                     input.get()));
    }
    void all_gather_into_tensor(TensorRef&& output, const TensorRef& input) const {
        all_gather_into_tensor(output, input);
    }
    /** reduce_scatter_tensor: input holds size() x output's elements; block rank() of the reduction. */
    void reduce_scatter_tensor(TensorRef& output, const TensorRef& input, ReduceOp op = ReduceOp::sum) const {
        detail::check(ds_comm_reduce_scatter_tensor(h_, output.get_mutable("Comm::reduce_scatter_tensor: output"),
                                                    input.get(), static_cast<int32_t>(op)));
    }
    void reduce_scatter_tensor(TensorRef&& output, const TensorRef& input, ReduceOp op = ReduceOp::sum) const {
        reduce_scatter_tensor(output, input, op);
    }
    /** all_to_all_single with equal splits: block j of input to rank j, block i of output from rank i. */
    void all_to_all_single(TensorRef& output, const TensorRef& input) const {
        detail::check(ds_comm_all_to_all_single(h_, output.get_mutable("Comm::all_to_all_single: output"), input.get()));
    }
    void all_to_all_single(TensorRef&& output, const TensorRef& input) const { all_to_all_single(output, input); }
    /** broadcast(tensor, src): every rank's tensor becomes rank src's. */
    void broadcast(TensorRef& tensor, int32_t src) const {
        detail::check(ds_comm_broadcast(h_, tensor.get_mutable("Comm::broadcast: tensor"), src));
    }
    void broadcast(TensorRef&& tensor, int32_t src) const { broadcast(tensor, src); }
    void barrier() const { detail::check(ds_comm_barrier(h_)); }

    ds_comm_t* get() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }

private:
    ds_comm_t* h_ = nullptr;
};

// ---------------------------------------------------------------------------
// Model: RAII over ds_model_t
// ---------------------------------------------------------------------------

/** A built-in model from a JSON spec (docs/MODELS.md), move-only. An engine
 *  made with it keeps it alive, so the Model may die first. */
class Model {
public:
    Model() noexcept = default;
    explicit Model(std::string_view spec_json) {
        std::string spec = detail::c_str(spec_json, "Model: spec_json");
        detail::check(ds_model_create(spec.c_str(), &h_));
    }
    Model(Model&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    Model& operator=(Model&& o) noexcept {
        if (this != &o) { ds_model_destroy(h_); h_ = std::exchange(o.h_, nullptr); }
        return *this;
    }
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;
    ~Model() { ds_model_destroy(h_); }

    int64_t num_params() const { int64_t v = 0; detail::check(ds_model_num_params(h_, &v)); return v; }
    ds_model_t* get() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }

private:
    ds_model_t* h_ = nullptr;
};

// ---------------------------------------------------------------------------
// Engine
// ---------------------------------------------------------------------------

/** ds_engine_options_t in C++ terms. `log`, when set, gets this engine's
 *  messages (owned by the Engine, so it lives as long as the engine). */
struct EngineOptions {
    const Comm* comm = nullptr;  ///< the engine keeps its own reference
    DLDevice device{kDLCPU, 0};
    void* cuda_stream = nullptr;
    LogFn log;
    int32_t log_level = DS_UNSET_I32;  ///< a DS_LOG_* value, or from DS_LOG_LEVEL
};

/** What step() did (ds_step_info_t by value). */
struct StepInfo {
    bool stepped = false;   ///< an accumulation boundary: an optimizer step was attempted
    bool skipped = false;   ///< that step was skipped for overflow
    float loss_scale = 1;   ///< after this call
    double grad_norm = 0;   ///< unscaled, before clipping (boundary only)
    double lr = 0;          ///< applied this step (boundary only)
    int64_t global_step = 0;
};

/** What Engine::train_batch returns: the batch's mean loss and its optimizer step. */
struct BatchResult {
    float loss = 0;  ///< mean over the micro-batches, averaged over the data-parallel replicas
    StepInfo step;
};

/** This rank's place in the pipeline and its last batch's timings (ds_pipe_info_t by value). */
struct PipeInfo {
    int32_t stage_id = 0;
    int32_t num_stages = 0;
    int32_t first_layer = 0;  ///< the stage's pipeline layers [first_layer, last_layer)
    int32_t last_layer = 0;
    int32_t num_layers = 0;   ///< the model's pipeline layers (n_layer + 3)
    int32_t micro_batches = 0;
    int32_t data_parallel_size = 0;
    double batch_seconds = 0;      ///< the last train_batch/eval_batch, wall clock
    double compute_seconds = 0;    ///< of which this stage's forwards, backwards and optimizer step
    double recompute_seconds = 0;  ///< of which forwards recomputed before their backward
};

/** One parameter (ds_engine_param_info); name and shape are engine-owned,
 *  valid from init() for the engine's life. */
struct ParamInfo {
    std::string_view name;
    Span<const int64_t> shape;
    DLDataType dtype{};
    bool trainable = false;
    int64_t numel = 0;
    bool expert = false;  // DS_PARAM_EXPERT: a built-in MoE layer's expert (DeepSpeed's is_moe_param)
};

/** ds_memory_report_t (bytes, this rank). */
struct MemoryReport {
    int64_t params_bytes = 0, grads_bytes = 0, optimizer_state_bytes = 0, buffers_bytes = 0, total_bytes = 0,
            peak_total_bytes = 0;
};

/** ds_load_checkpoint flags (OR them). */
enum LoadFlags : uint32_t {
    load_default = 0,
    load_no_optimizer_states = DS_LOAD_NO_OPTIMIZER_STATES,
    load_no_lr_scheduler_states = DS_LOAD_NO_LR_SCHEDULER_STATES,
    load_module_only = DS_LOAD_MODULE_ONLY,
    load_non_strict = DS_LOAD_NON_STRICT,
};

/** States Engine::offload_states moves (OR them; 0 = all): DeepSpeed's OffloadStateTypeEnum. */
enum OffloadState : uint32_t {
    offload_optim_states = DS_OFFLOAD_OPTIM_STATES,
    offload_hp_params = DS_OFFLOAD_HP_PARAMS,
    offload_lp_params = DS_OFFLOAD_LP_PARAMS,
    offload_lp_grads = DS_OFFLOAD_LP_GRADS,
    offload_contiguous_grad_buffer = DS_OFFLOAD_CONTIGUOUS_GRAD_BUFFER,
    offload_all_states = DS_OFFLOAD_ALL_STATES,
};
/** Where they go: DeepSpeed's OffloadDeviceEnum. */
enum class OffloadDevice : int32_t { cpu = DS_OFFLOAD_DEVICE_CPU, nvme = DS_OFFLOAD_DEVICE_NVME };

/** ds_engine_accumulate_grad_ex flags. */
enum class Grad : uint32_t { divide_by_accumulation = 0, predivided = DS_GRAD_PREDIVIDED };

/**
 * The training engine (deepspeed.initialize's engine), move-only: the
 * destructor is ds_engine_destroy (local, never collective). A moved-from
 * Engine holds no handle; every call on it throws DS_ERR_INVALID_HANDLE.
 */
class Engine {
public:
    Engine() noexcept = default;
    /** ds_engine_create from DeepSpeed JSON text. */
    explicit Engine(std::string_view config_json, EngineOptions opts = {}) {
        create(opts, [&](const ds_engine_options_t* o, ds_engine_t** out) {
            std::string cfg = detail::c_str(config_json, "Engine: config_json");
            return ds_engine_create(cfg.c_str(), o, out);
        });
    }
    /** ds_engine_create_from_file. */
    static Engine from_file(std::string_view path, EngineOptions opts = {}) {
        Engine e;
        e.create(opts, [&](const ds_engine_options_t* o, ds_engine_t** out) {
            std::string p = detail::c_str(path, "Engine::from_file: path");
            return ds_engine_create_from_file(p.c_str(), o, out);
        });
        return e;
    }
    /** ds_engine_create_with_model: registers the model's parameters and inits. */
    static Engine with_model(std::string_view config_json, const Model& model, EngineOptions opts = {}) {
        Engine e;
        e.create(opts, [&](const ds_engine_options_t* o, ds_engine_t** out) {
            std::string cfg = detail::c_str(config_json, "Engine::with_model: config_json");
            return ds_engine_create_with_model(cfg.c_str(), model.get(), o, out);
        });
        return e;
    }

    Engine(Engine&& o) noexcept : h_(std::exchange(o.h_, nullptr)), log_(std::move(o.log_)) {}
    Engine& operator=(Engine&& o) noexcept {
        if (this != &o) {
            ds_engine_destroy(h_);  // before its log sink goes
            h_ = std::exchange(o.h_, nullptr);
            log_ = std::move(o.log_);
        }
        return *this;
    }
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;
    ~Engine() { ds_engine_destroy(h_); }

    ds_engine_t* get() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }

    // ---- parameters ------------------------------------------------------
    /** ds_engine_add_param (the value is copied). */
    void add_param(std::string_view name, const TensorRef& init, bool trainable = true) {
        detail::check(ds_engine_add_param(h_, detail::c_str(name, "add_param: name").c_str(), init.get(),
                                          trainable ? DS_PARAM_TRAINABLE : 0u));
    }
    void init() { detail::check(ds_engine_init(h_)); }

    int64_t num_params() const { int64_t v = 0; detail::check(ds_engine_num_params(h_, &v)); return v; }
    ParamInfo param_info(int64_t index) const {
        ds_param_info_t c;
        std::memset(&c, 0, sizeof c);
        c.struct_size = sizeof c;
        detail::check(ds_engine_param_info(h_, index, &c));
        ParamInfo p;
        p.name = c.name;
        p.shape = Span<const int64_t>(c.shape, static_cast<size_t>(c.ndim));
        p.dtype = c.dtype;
        p.trainable = (c.flags & DS_PARAM_TRAINABLE) != 0;
        p.numel = c.numel;
        p.expert = (c.flags & DS_PARAM_EXPERT) != 0;
        return p;
    }
    /** Every parameter in the order added (= model.named_parameters()). */
    std::vector<ParamInfo> named_parameters() const {
        std::vector<ParamInfo> out;
        const int64_t n = num_params();
        out.reserve(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) out.push_back(param_info(i));
        return out;
    }

    /** Working-precision weights (T = float, half or bfloat16, the engine's working dtype). */
    template <class T>
    View<const T> param(std::string_view name) {
        DLTensor t;
        const std::string n = detail::c_str(name, "param: name");
        detail::check(ds_engine_param_view(h_, n.c_str(), &t));
        return View<const T>(t, detail::cat("param<", dtype_name(dtype_of<T>::value), ">(\"", n, "\")"));
    }
    /** The gradient accumulation buffer (writable: = param.grad). */
    template <class T>
    View<T> grad(std::string_view name) {
        DLTensor t;
        const std::string n = detail::c_str(name, "grad: name");
        detail::check(ds_engine_grad_view(h_, n.c_str(), &t));
        return View<T>(t, detail::cat("grad<", dtype_name(dtype_of<T>::value), ">(\"", n, "\")"));
    }

    /** ds_engine_accumulate_grad_ex: buffer += grad (/ accumulation steps unless predivided). */
    void accumulate_grad(std::string_view name, const TensorRef& grad, Grad mode = Grad::divide_by_accumulation) {
        detail::check(ds_engine_accumulate_grad_ex(h_, detail::c_str(name, "accumulate_grad: name").c_str(),
                                                   grad.get(), static_cast<uint32_t>(mode)));
    }
    /** The same from a container (std::vector, std::array, Span) and its row-major shape. */
    template <class C>
    void accumulate_grad(std::string_view name, const C& data, const Dims& shape,
                         Grad mode = Grad::divide_by_accumulation) {
        accumulate_grad(name, named_tensor("accumulate_grad", name, data, shape), mode);
    }

    /** ds_backward(e, NULL): the engine.backward epilogue (or a model's backward from its loss). */
    void backward() { detail::check(ds_backward(h_, nullptr)); }
    /** ds_backward with the gradient of a model output (after a forward without targets). */
    void backward(const TensorRef& out_grad) { detail::check(ds_backward(h_, out_grad.get())); }

    /** ds_step: engine.step(). */
    StepInfo step() {
        ds_step_info_t c;
        std::memset(&c, 0, sizeof c);
        c.struct_size = sizeof c;
        detail::check(ds_step(h_, &c));
        return step_info(c);
    }

    // ---- ZeRO-3 gather/release ---------------------------------------------
    void gather(const std::vector<std::string>& names) { names_call(names, &ds_engine_gather, "gather"); }
    void release(const std::vector<std::string>& names) { names_call(names, &ds_engine_release, "release"); }

    // ---- built-in model ------------------------------------------------------
    /** loss = engine(inputs, targets): the mean loss (training mode needs the micro-batch size). */
    float forward(const TensorRef& inputs, const TensorRef& targets) {
        DLTensor in[2] = {*inputs.get(), *targets.get()};
        float loss = 0;
        TensorRef out(Span<float>(&loss, 1), Dims{1});
        detail::check(ds_forward(h_, in, 2, out.get_mutable("forward: out")));
        return loss;
    }
    /** output = engine(inputs) into `out` (fp32, the output's shape). */
    void forward(const TensorRef& inputs, TensorRef& out) {
        detail::check(ds_forward(h_, inputs.get(), 1, out.get_mutable("forward: out")));
    }

    // ---- pipeline stage (a GPT spec with "pipeline": {"stages": S}) --------------
    /** ds_train_batch: DeepSpeed's train_batch over gradient_accumulation_steps
     *  micro-batches, then one optimizer step (collective). `inputs` is read on the
     *  first stage, `targets` on the last; elsewhere either may be nullptr. */
    BatchResult train_batch(const TensorRef* inputs, const TensorRef* targets) {
        ds_step_info_t c;
        std::memset(&c, 0, sizeof c);
        c.struct_size = sizeof c;
        BatchResult r;
        detail::check(ds_train_batch(h_, inputs ? inputs->get() : nullptr, targets ? targets->get() : nullptr,
                                     &r.loss, &c));
        r.step = step_info(c);
        return r;
    }
    BatchResult train_batch(const TensorRef& inputs, const TensorRef& targets) {
        return train_batch(&inputs, &targets);
    }
    /** ds_eval_batch: DeepSpeed's eval_batch (no gradients); the mean loss. Collective. */
    float eval_batch(const TensorRef* inputs, const TensorRef* targets) {
        float loss = 0;
        detail::check(ds_eval_batch(h_, inputs ? inputs->get() : nullptr, targets ? targets->get() : nullptr, &loss));
        return loss;
    }
    float eval_batch(const TensorRef& inputs, const TensorRef& targets) { return eval_batch(&inputs, &targets); }
    /** ds_engine_pipe_info: this rank's stage and its last batch's timings. */
    PipeInfo pipe_info() const {
        ds_pipe_info_t c;
        std::memset(&c, 0, sizeof c);
        c.struct_size = sizeof c;
        detail::check(ds_engine_pipe_info(h_, &c));
        PipeInfo p;
        p.stage_id = c.stage_id;
        p.num_stages = c.num_stages;
        p.first_layer = c.first_layer;
        p.last_layer = c.last_layer;
        p.num_layers = c.num_layers;
        p.micro_batches = c.micro_batches;
        p.data_parallel_size = c.data_parallel_size;
        p.batch_seconds = c.batch_seconds;
        p.compute_seconds = c.compute_seconds;
        p.recompute_seconds = c.recompute_seconds;
        return p;
    }

    /** engine.eval() (true) / engine.train() (false). */
    void eval(bool on = true) { detail::check(ds_engine_eval(h_, on ? 1 : 0)); }
    void train() { eval(false); }

    // ---- checkpoints -----------------------------------------------------------
    /** engine.save_checkpoint(dir, tag, client_state); nullopt tag: "global_step<N>". */
    void save_checkpoint(std::string_view dir, std::optional<std::string_view> tag = std::nullopt,
                         std::optional<std::string_view> client_state_json = std::nullopt) {
        const std::string d = detail::c_str(dir, "save_checkpoint: save_dir");
        const std::string t = tag ? detail::c_str(*tag, "save_checkpoint: tag") : std::string();
        const std::string cs = client_state_json ? detail::c_str(*client_state_json, "save_checkpoint: client_state_json")
                                                 : std::string();
        detail::check(ds_save_checkpoint(h_, d.c_str(), tag ? t.c_str() : nullptr,
                                         client_state_json ? cs.c_str() : nullptr));
    }
    /** engine.load_checkpoint(dir, tag); returns the saved client state JSON ("{}" if none). */
    std::string load_checkpoint(std::string_view dir, std::optional<std::string_view> tag = std::nullopt,
                                uint32_t flags = load_default) {
        const std::string d = detail::c_str(dir, "load_checkpoint: load_dir");
        const std::string t = tag ? detail::c_str(*tag, "load_checkpoint: tag") : std::string();
        const char* cs = nullptr;
        detail::check(ds_load_checkpoint(h_, d.c_str(), tag ? t.c_str() : nullptr, flags, &cs));
        return cs ? std::string(cs) : std::string("{}");
    }
    /** engine.save_16bit_model(dir, filename); nullopt filename: model.safetensors. */
    void save_16bit_model(std::string_view dir, std::optional<std::string_view> filename = std::nullopt,
                          bool exclude_frozen = false) {
        const std::string d = detail::c_str(dir, "save_16bit_model: save_dir");
        const std::string f = filename ? detail::c_str(*filename, "save_16bit_model: filename") : std::string();
        detail::check(ds_save_16bit_model_ex(h_, d.c_str(), filename ? f.c_str() : nullptr,
                                             exclude_frozen ? DS_SAVE_EXCLUDE_FROZEN : 0u));
    }

    // ---- getters and setters -----------------------------------------------------
    int32_t rank() const { return get_i32(&ds_engine_rank); }
    int32_t world_size() const { return get_i32(&ds_engine_world_size); }
    float loss_scale() const { float v = 0; detail::check(ds_engine_loss_scale(h_, &v)); return v; }
    float loss_multiplier() const { float v = 0; detail::check(ds_engine_loss_multiplier(h_, &v)); return v; }
    double lr() const { double v = 0; detail::check(ds_engine_get_lr(h_, &v)); return v; }
    void set_lr(double lr) { detail::check(ds_engine_set_lr(h_, lr)); }
    /** The CUDA stream (a cudaStream_t; nullptr: the legacy default stream) an
     *  engine on cuda:N orders its work on; it must stay valid while the engine
     *  uses it. Throws InvalidState on an engine that trains on the CPU. */
    void set_stream(void* cuda_stream) { detail::check(ds_engine_set_stream(h_, cuda_stream)); }
    int64_t global_steps() const { return get_i64(&ds_engine_global_steps); }
    int64_t global_samples() const { return get_i64(&ds_engine_global_samples); }
    int64_t skipped_steps() const { return get_i64(&ds_engine_skipped_steps); }
    int64_t micro_steps() const { return get_i64(&ds_engine_micro_steps); }
    bool is_gradient_accumulation_boundary() const {
        return get_i32(&ds_engine_is_gradient_accumulation_boundary) != 0;
    }
    void set_gradient_accumulation_boundary(bool value) {
        detail::check(ds_engine_set_gradient_accumulation_boundary(h_, value ? 1 : 0));
    }
    /** The resolved config JSON; engine-owned, valid for the engine's life. */
    std::string_view config_json() const {
        const char* s = nullptr;
        detail::check(ds_engine_config_json(h_, &s));
        return s;
    }
    /** The comms logger's table (a copy: the C text lives only until the next call). */
    std::string comms_log_summary() {
        const char* s = nullptr;
        detail::check(ds_engine_comms_log_summary(h_, &s));
        return s ? std::string(s) : std::string();
    }
    // ---- offloading states (engine.offload_states / reload_states) -------------
    /** ds_engine_offload_states: moves `which` (OffloadState bits, 0 = all this
     *  engine can move) to `device`; nvme_path nullopt = the config's. Until
     *  reload_states() the calls that read them throw DS_ERR_INVALID_STATE. */
    void offload_states(uint32_t which = 0, OffloadDevice device = OffloadDevice::cpu,
                        std::optional<std::string_view> nvme_path = std::nullopt) {
        const std::string p = nvme_path ? detail::c_str(*nvme_path, "offload_states: nvme_path") : std::string();
        detail::check(ds_engine_offload_states(h_, which, static_cast<int32_t>(device), nvme_path ? p.c_str() : nullptr));
    }
    /** ds_engine_reload_states: every offloaded state back, bit-identical (no-op when none is out). */
    void reload_states() { detail::check(ds_engine_reload_states(h_)); }
    /** ds_engine_empty_partition_cache: ZeRO-3 frees gathered whole weights (a no-op below ZeRO-3). */
    void empty_partition_cache() { detail::check(ds_engine_empty_partition_cache(h_)); }

    MemoryReport memory_report() const { return report(ds_engine_memory_report); }
    // Bytes on disk per category (offload_optimizer.device "nvme"; zeros otherwise).
    MemoryReport disk_report() const { return report(ds_engine_disk_report); }

private:
    MemoryReport report(ds_status_t (*fn)(const ds_engine_t*, ds_memory_report_t*)) const {
        ds_memory_report_t c;
        std::memset(&c, 0, sizeof c);
        c.struct_size = sizeof c;
        detail::check(fn(h_, &c));
        MemoryReport m;
        m.params_bytes = c.params_bytes;
        m.grads_bytes = c.grads_bytes;
        m.optimizer_state_bytes = c.optimizer_state_bytes;
        m.buffers_bytes = c.buffers_bytes;
        m.total_bytes = c.total_bytes;
        m.peak_total_bytes = c.peak_total_bytes;
        return m;
    }

public:

    // ---- full fp32 copies (safe_get_full_* / safe_set_full_*) ------------------------
    std::vector<float> get_full_fp32_param(std::string_view name) {
        return get_full(name, "get_full_fp32_param", [&](const char* n, DLTensor* t) {
            return ds_engine_get_full_fp32_param(h_, n, t);
        });
    }
    std::vector<float> get_full_grad(std::string_view name) {
        return get_full(name, "get_full_grad", [&](const char* n, DLTensor* t) {
            return ds_engine_get_full_grad(h_, n, t);
        });
    }
    std::vector<float> get_full_optimizer_state(std::string_view name, std::string_view key) {
        const std::string k = detail::c_str(key, "get_full_optimizer_state: key");
        return get_full(name, "get_full_optimizer_state", [&](const char* n, DLTensor* t) {
            return ds_engine_get_full_optimizer_state(h_, n, k.c_str(), t);
        });
    }
    void set_full_fp32_param(std::string_view name, Span<const float> value) {
        set_full(name, value, "set_full_fp32_param", [&](const char* n, const DLTensor* t) {
            return ds_engine_set_full_fp32_param(h_, n, t);
        });
    }
    void set_full_grad(std::string_view name, Span<const float> value) {
        set_full(name, value, "set_full_grad", [&](const char* n, const DLTensor* t) {
            return ds_engine_set_full_grad(h_, n, t);
        });
    }
    void set_full_optimizer_state(std::string_view name, std::string_view key, Span<const float> value) {
        const std::string k = detail::c_str(key, "set_full_optimizer_state: key");
        set_full(name, value, "set_full_optimizer_state", [&](const char* n, const DLTensor* t) {
            return ds_engine_set_full_optimizer_state(h_, n, k.c_str(), t);
        });
    }

private:
    template <class CreateFn>
    void create(EngineOptions& opts, CreateFn&& fn) {
        check_abi();
        ds_engine_options_t o;
        ds_engine_options_init(&o, sizeof o);
        o.comm = opts.comm ? opts.comm->get() : nullptr;
        o.device = opts.device;
        o.cuda_stream = opts.cuda_stream;
        o.log_level = opts.log_level;
        std::unique_ptr<LogFn> log;
        if (opts.log) {
            log = std::make_unique<LogFn>(std::move(opts.log));
            o.log_callback = &detail::log_trampoline;
            o.log_user_data = log.get();
        }
        ds_engine_t* h = nullptr;
        detail::check(fn(&o, &h));
        h_ = h;
        log_ = std::move(log);
    }
    static StepInfo step_info(const ds_step_info_t& c) noexcept {
        StepInfo s;
        s.stepped = c.stepped != 0;
        s.skipped = c.skipped != 0;
        s.loss_scale = c.loss_scale;
        s.grad_norm = c.grad_norm;
        s.lr = c.lr;
        s.global_step = c.global_step;
        return s;
    }
    int32_t get_i32(ds_status_t (*fn)(const ds_engine_t*, int32_t*)) const {
        int32_t v = 0;
        detail::check(fn(h_, &v));
        return v;
    }
    int64_t get_i64(ds_status_t (*fn)(const ds_engine_t*, int64_t*)) const {
        int64_t v = 0;
        detail::check(fn(h_, &v));
        return v;
    }
    void names_call(const std::vector<std::string>& names, ds_status_t (*fn)(ds_engine_t*, const char* const*, int32_t),
                    const char* what) {
        std::vector<const char*> ptrs;
        ptrs.reserve(names.size());
        for (const std::string& n : names) {
            if (n.find('\0') != std::string::npos)
                detail::fail(Status::invalid_argument, detail::cat(what, ": a name contains a NUL byte"));
            ptrs.push_back(n.c_str());
        }
        detail::check(fn(h_, ptrs.data(), static_cast<int32_t>(ptrs.size())));
    }
    /** A TensorRef whose construction errors name the call and the parameter. */
    template <class C>
    static TensorRef named_tensor(const char* what, std::string_view name, const C& data, const Dims& shape) {
        try {
            return TensorRef(data, shape);
        } catch (const Error& e) {
            detail::fail(e.status(), detail::cat(what, "(\"", name, "\"): ", e.what()));
        }
    }
    /** The shape of a parameter by name (for the full-copy calls). */
    std::vector<int64_t> shape_of(const std::string& name, const char* what) const {
        const int64_t n = num_params();
        for (int64_t i = 0; i < n; ++i) {
            ParamInfo p = param_info(i);
            if (p.name == name) return std::vector<int64_t>(p.shape.begin(), p.shape.end());
        }
        detail::fail(Status::not_found, detail::cat(what, ": no parameter named \"", name, "\""));
    }
    template <class Fn>
    std::vector<float> get_full(std::string_view name, const char* what, Fn&& fn) {
        const std::string n = detail::c_str(name, what);
        std::vector<int64_t> shape = shape_of(n, what);
        int64_t numel = 1;
        for (int64_t d : shape) numel *= d;
        std::vector<float> out(static_cast<size_t>(numel));
        TensorRef t(Span<float>(out.data(), out.size()), Dims(shape));
        detail::check(fn(n.c_str(), t.get_mutable(what)));
        return out;
    }
    template <class Fn>
    void set_full(std::string_view name, Span<const float> value, const char* what, Fn&& fn) {
        const std::string n = detail::c_str(name, what);
        std::vector<int64_t> shape = shape_of(n, what);
        TensorRef t = named_tensor(what, n, value, Dims(shape));  // checks the count against the shape
        detail::check(fn(n.c_str(), t.get()));
    }

    ds_engine_t* h_ = nullptr;
    std::unique_ptr<LogFn> log_;  // the engine's sink; heap-held so moves keep its address
};

}  // namespace deepspeed_c

// Topology, PipeSchedule, pipe_send/pipe_recv (need Comm and TensorRef above).
#include "deepspeed_c_pipe.hpp"

#ifndef DEEPSPEED_C_HPP_NO_DS_ALIAS
/** The short name the issue and the examples use: ds::Engine, ds::Error. */
namespace ds = deepspeed_c;
#endif

#endif /* DEEPSPEED_C_HPP */

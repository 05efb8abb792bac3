/*
 * deepspeed_c_pipe.hpp — pipeline parallelism in the C++ wrapper:
 * ds::Topology (ds_topology_*, DeepSpeed's ProcessTopology), ds::PipeSchedule
 * (ds_pipe_schedule_*, a range-for iterable of ds::PipeInstr) and
 * ds::pipe_send / ds::pipe_recv, ds::partition_layers (ds_pipe_partition).
 * deepspeed_c.hpp includes it (include that
 * one); the rules there hold (errors throw ds::Error with the C message).
 */
#ifndef DEEPSPEED_C_PIPE_HPP
#define DEEPSPEED_C_PIPE_HPP

#ifndef DEEPSPEED_C_HPP
#error "include deepspeed_c.hpp, which includes deepspeed_c_pipe.hpp"
#endif

#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace deepspeed_c {

namespace detail {
/** NUL-checked copies of names plus the pointer array a C call takes. */
struct CNames {
    std::vector<std::string> owned;
    std::vector<const char*> ptrs;
    CNames(const std::vector<std::string>& names, const char* what) {
        owned.reserve(names.size());
        for (const std::string& n : names) owned.push_back(c_str(n, what));
        for (const std::string& n : owned) ptrs.push_back(n.c_str());
    }
    int32_t size() const noexcept { return static_cast<int32_t>(ptrs.size()); }
};
}  // namespace detail

// ---------------------------------------------------------------------------
// Topology: RAII over ds_topology_t
// ---------------------------------------------------------------------------

/** One axis of a topology: its name (topology-owned) and size. */
struct TopologyAxis {
    std::string_view name;
    int32_t dim = 0;
};

/** DeepSpeed's ProcessTopology (move-only): named axes over the ranks, the
 *  last axis varying fastest. Plain data except comm()/group_comm(). */
class Topology {
public:
    Topology() noexcept = default;
    explicit Topology(ds_topology_t* handle) noexcept : h_(handle) {}
    /** ProcessTopology(axes, dims). */
    Topology(const std::vector<std::string>& axes, const std::vector<int32_t>& dims) {
        detail::CNames names(axes, "Topology: axis name");
        if (dims.size() != axes.size())
            detail::fail(Status::invalid_argument,
                         detail::cat("Topology: ", axes.size(), " axes but ", dims.size(), " dims"));
        detail::check(ds_topology_create(names.ptrs.data(), dims.data(), names.size(), &h_));
    }
    /** PipeDataParallelTopology(num_pp, num_dp): axes pipe, data. */
    static Topology pipe_data(int32_t num_pp, int32_t num_dp) {
        ds_topology_t* h = nullptr;
        detail::check(ds_topology_create_pipe_data(num_pp, num_dp, &h));
        return Topology(h);
    }
    /** PipeModelDataParallelTopology(num_pp, num_mp, num_dp): axes pipe, data, model. */
    static Topology pipe_model_data(int32_t num_pp, int32_t num_mp, int32_t num_dp) {
        ds_topology_t* h = nullptr;
        detail::check(ds_topology_create_pipe_model_data(num_pp, num_mp, num_dp, &h));
        return Topology(h);
    }
    /** PipelineParallelGrid's default (prime factors dealt to pipe and data). */
    static Topology default_for(int32_t world_size) {
        ds_topology_t* h = nullptr;
        detail::check(ds_topology_create_default(world_size, &h));
        return Topology(h);
    }
    Topology(Topology&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    Topology& operator=(Topology&& o) noexcept {
        if (this != &o) { ds_topology_destroy(h_); h_ = std::exchange(o.h_, nullptr); }
        return *this;
    }
    Topology(const Topology&) = delete;
    Topology& operator=(const Topology&) = delete;
    ~Topology() { ds_topology_destroy(h_); }

    ds_topology_t* get() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }

    int32_t world_size() const { int32_t v = 0; detail::check(ds_topology_world_size(h_, &v)); return v; }
    int32_t num_axes() const { int32_t v = 0; detail::check(ds_topology_num_axes(h_, &v)); return v; }
    TopologyAxis axis(int32_t index) const {
        const char* n = nullptr;
        TopologyAxis a;
        detail::check(ds_topology_axis(h_, index, &n, &a.dim));
        a.name = n;
        return a;
    }
    /** Every axis in order (get_axis_names with the sizes). */
    std::vector<TopologyAxis> axes() const {
        std::vector<TopologyAxis> out;
        for (int32_t i = 0, n = num_axes(); i < n; ++i) out.push_back(axis(i));
        return out;
    }
    /** get_dim: 0 when there is no such axis. */
    int32_t dim(std::string_view axis_name) const {
        int32_t v = 0;
        detail::check(ds_topology_dim(h_, detail::c_str(axis_name, "Topology::dim: axis").c_str(), &v));
        return v;
    }
    /** get_rank: the rank at coords (axis order). */
    int32_t rank_of(const std::vector<int32_t>& coords) const {
        int32_t v = 0;
        detail::check(ds_topology_rank_of(h_, coords.data(), static_cast<int32_t>(coords.size()), &v));
        return v;
    }
    /** get_coord: the coordinates of rank in axis order. */
    std::vector<int32_t> coord_of(int32_t rank) const {
        std::vector<int32_t> c(static_cast<size_t>(num_axes()));
        detail::check(ds_topology_coord_of(h_, rank, c.data(), static_cast<int32_t>(c.size())));
        return c;
    }
    /** get_axis_comm_lists: one list of ranks per combination of the other axes ({} for an unknown axis). */
    std::vector<std::vector<int32_t>> axis_comm_lists(std::string_view axis_name) const {
        const std::string a = detail::c_str(axis_name, "Topology::axis_comm_lists: axis");
        int32_t lists = 0, len = 0;
        std::vector<int32_t> flat(static_cast<size_t>(world_size()));  // the lists hold every rank once
        detail::check(ds_topology_axis_comm_lists(h_, a.c_str(), flat.data(), static_cast<int64_t>(flat.size()),
                                                  &lists, &len));
        std::vector<std::vector<int32_t>> out;
        for (int32_t i = 0; i < lists; ++i)
            out.emplace_back(flat.begin() + i * len, flat.begin() + (i + 1) * len);
        return out;
    }
    /** filter_match(axis=coord, ...): the matching ranks in increasing order (no criteria: every rank). */
    std::vector<int32_t> filter_match(const std::vector<std::pair<std::string, int32_t>>& criteria) const {
        std::vector<std::string> names;
        std::vector<int32_t> coords;
        for (const auto& c : criteria) { names.push_back(c.first); coords.push_back(c.second); }
        detail::CNames n(names, "Topology::filter_match: axis");
        int32_t count = 0;
        std::vector<int32_t> out(static_cast<size_t>(world_size()));  // at most every rank matches
        detail::check(ds_topology_filter_match(h_, n.ptrs.data(), coords.data(), n.size(), out.data(),
                                               static_cast<int64_t>(out.size()), &count));
        out.resize(static_cast<size_t>(count));
        return out;
    }
    /** get_rank_repr(rank, omit_axes); nullopt = DeepSpeed's default {"data", "pipe"}. */
    std::string rank_repr(int32_t rank, std::optional<std::vector<std::string>> omit_axes = std::nullopt) const {
        detail::CNames omit(omit_axes ? *omit_axes : std::vector<std::string>(), "Topology::rank_repr: omit axis");
        const char* const* o = omit_axes ? omit.ptrs.data() : nullptr;
        size_t needed = 0;
        char probe[1];
        const ds_status_t s = ds_topology_rank_repr(h_, rank, o, omit.size(), probe, sizeof probe, &needed);
        if (s == DS_OK) return std::string();
        if (needed == 0) detail::check(s);  // not a size problem: throw its error
        std::string out(needed, '\0');
        detail::check(ds_topology_rank_repr(h_, rank, o, omit.size(), out.data(), out.size(), &needed));
        out.resize(needed - 1);
        return out;
    }
    /** This rank's communicator along axis (collective over world; new rank = coordinate). */
    Comm comm(std::string_view axis_name, const Comm& world) const {
        ds_comm_t* h = nullptr;
        detail::check(ds_topology_comm(h_, world.get(), detail::c_str(axis_name, "Topology::comm: axis").c_str(), &h));
        return Comm(h);
    }
    /** The ranks sharing this rank's coordinates on every axis not listed (collective over world). */
    Comm group_comm(const std::vector<std::string>& axes_list, const Comm& world) const {
        detail::CNames n(axes_list, "Topology::group_comm: axis");
        ds_comm_t* h = nullptr;
        detail::check(ds_topology_group_comm(h_, world.get(), n.ptrs.data(), n.size(), &h));
        return Comm(h);
    }

private:
    ds_topology_t* h_ = nullptr;
};

// ---------------------------------------------------------------------------
// PipeSchedule: RAII over ds_pipe_schedule_t, iterable
// ---------------------------------------------------------------------------

enum class ScheduleKind : int32_t {
    train = DS_PIPE_SCHEDULE_TRAIN,
    inference = DS_PIPE_SCHEDULE_INFERENCE,
    data_parallel = DS_PIPE_SCHEDULE_DATA_PARALLEL,
};

/** DS_PIPE_INSTR_*: DeepSpeed's instruction classes. */
enum class PipeOp : int32_t {
    load_micro_batch = DS_PIPE_INSTR_LOAD_MICRO_BATCH,
    forward_pass = DS_PIPE_INSTR_FORWARD_PASS,
    backward_pass = DS_PIPE_INSTR_BACKWARD_PASS,
    send_activation = DS_PIPE_INSTR_SEND_ACTIVATION,
    recv_activation = DS_PIPE_INSTR_RECV_ACTIVATION,
    send_grad = DS_PIPE_INSTR_SEND_GRAD,
    recv_grad = DS_PIPE_INSTR_RECV_GRAD,
    reduce_tied_grads = DS_PIPE_INSTR_REDUCE_TIED_GRADS,
    reduce_grads = DS_PIPE_INSTR_REDUCE_GRADS,
    optimizer_step = DS_PIPE_INSTR_OPTIMIZER_STEP,
};

/** DeepSpeed's class name of an instruction ("ForwardPass"; "?" for no PipeOp). */
inline std::string_view pipe_instr_name(PipeOp op) noexcept { return ds_pipe_instr_name(static_cast<int32_t>(op)); }

/** One instruction (ds_pipe_instr_t by value). */
struct PipeInstr {
    PipeOp op = PipeOp::load_micro_batch;
    int32_t buffer_id = -1;    ///< -1 for the reductions and the optimizer step
    int32_t step = 0;
    int32_t micro_batch = -1;  ///< -1 for the reductions and the optimizer step
    std::string_view name() const noexcept { return pipe_instr_name(op); }
};

/**
 * A pipeline schedule for one batch (move-only). Range-for walks every
 * instruction from the first: begin() resets the schedule, so each loop
 * sees the whole stream (one loop at a time: iterators share the position).
 * next() is the C iterator itself.
 */
class PipeSchedule {
public:
    PipeSchedule() noexcept = default;
    PipeSchedule(ScheduleKind kind, int32_t micro_batches, int32_t stages, int32_t stage_id) {
        detail::check(ds_pipe_schedule_create(static_cast<int32_t>(kind), micro_batches, stages, stage_id, &h_));
    }
    PipeSchedule(PipeSchedule&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    PipeSchedule& operator=(PipeSchedule&& o) noexcept {
        if (this != &o) { ds_pipe_schedule_destroy(h_); h_ = std::exchange(o.h_, nullptr); }
        return *this;
    }
    PipeSchedule(const PipeSchedule&) = delete;
    PipeSchedule& operator=(const PipeSchedule&) = delete;
    ~PipeSchedule() { ds_pipe_schedule_destroy(h_); }

    ds_pipe_schedule_t* get() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }

    /** The next instruction, nullopt once all were returned (until reset()). */
    std::optional<PipeInstr> next() {
        ds_pipe_instr_t c = blank();
        int32_t done = 0;
        detail::check(ds_pipe_schedule_next(h_, &c, &done));
        if (done) return std::nullopt;
        return from_c(c);
    }
    void reset() { detail::check(ds_pipe_schedule_reset(h_)); }
    int32_t num_buffers() const { int32_t v = 0; detail::check(ds_pipe_schedule_num_buffers(h_, &v)); return v; }
    int32_t num_steps() const { int32_t v = 0; detail::check(ds_pipe_schedule_num_steps(h_, &v)); return v; }
    int32_t step_size(int32_t step) const {
        int32_t v = 0;
        detail::check(ds_pipe_schedule_step_size(h_, step, &v));
        return v;
    }
    /** Instruction `index` of `step` (random access; the position is unchanged). */
    PipeInstr instr(int32_t step, int32_t index) const {
        ds_pipe_instr_t c = blank();
        detail::check(ds_pipe_schedule_instr(h_, step, index, &c));
        return from_c(c);
    }
    /** The instructions of one step (DeepSpeed's yielded list; empty for a bubble). */
    std::vector<PipeInstr> step_instrs(int32_t step) const {
        std::vector<PipeInstr> out;
        for (int32_t i = 0, n = step_size(step); i < n; ++i) out.push_back(instr(step, i));
        return out;
    }

    class iterator {
    public:
        using iterator_category = std::input_iterator_tag;
        using value_type = PipeInstr;
        using difference_type = std::ptrdiff_t;
        using pointer = const PipeInstr*;
        using reference = const PipeInstr&;
        iterator() noexcept = default;
        explicit iterator(PipeSchedule* s) : s_(s) { advance(); }
        reference operator*() const noexcept { return *cur_; }
        pointer operator->() const noexcept { return &*cur_; }
        iterator& operator++() { advance(); return *this; }
        void operator++(int) { advance(); }
        friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.cur_.has_value() == b.cur_.has_value() && (!a.cur_ || a.s_ == b.s_); }
        friend bool operator!=(const iterator& a, const iterator& b) noexcept { return !(a == b); }

    private:
        void advance() { cur_ = s_ ? s_->next() : std::nullopt; }
        PipeSchedule* s_ = nullptr;
        std::optional<PipeInstr> cur_;
    };
    /** Resets, then yields every instruction. */
    iterator begin() { reset(); return iterator(this); }
    iterator end() noexcept { return iterator(); }

private:
    static ds_pipe_instr_t blank() noexcept {
        ds_pipe_instr_t c;
        std::memset(&c, 0, sizeof c);
        c.struct_size = sizeof c;
        return c;
    }
    static PipeInstr from_c(const ds_pipe_instr_t& c) noexcept {
        PipeInstr p;
        p.op = static_cast<PipeOp>(c.type);
        p.buffer_id = c.buffer_id;
        p.step = c.step;
        p.micro_batch = c.micro_batch;
        return p;
    }
    ds_pipe_schedule_t* h_ = nullptr;
};

// ---------------------------------------------------------------------------
// Stage boundaries
// ---------------------------------------------------------------------------

/** ds_pipe_partition: the num_stages + 1 boundaries DeepSpeed's PipelineModule computes for
 *  `method` ("uniform", "parameters" over param_counts, "type:<regex>" over type_names);
 *  the list a method does not read may be empty. num_layers: the layers' count. */
inline std::vector<int32_t> partition_layers(const std::string& method, int32_t num_stages, int32_t num_layers,
                                             const std::vector<int64_t>& param_counts = {},
                                             const std::vector<std::string>& type_names = {}) {
    if (!param_counts.empty() && static_cast<int64_t>(param_counts.size()) != num_layers)
        detail::fail(Status::invalid_argument,
                     detail::cat("partition_layers: ", param_counts.size(), " param_counts for ", num_layers, " layers"));
    if (!type_names.empty() && static_cast<int64_t>(type_names.size()) != num_layers)
        detail::fail(Status::invalid_argument,
                     detail::cat("partition_layers: ", type_names.size(), " type_names for ", num_layers, " layers"));
    std::vector<const char*> names;
    names.reserve(type_names.size());
    for (const std::string& n : type_names) names.push_back(n.c_str());
    std::vector<int32_t> parts(num_stages > 0 ? static_cast<size_t>(num_stages) + 1 : 1);
    detail::check(ds_pipe_partition(method.c_str(), num_layers, param_counts.empty() ? nullptr : param_counts.data(),
                                    names.empty() ? nullptr : names.data(), num_stages, parts.data()));
    return parts;
}

// ---------------------------------------------------------------------------
// Point-to-point between stages
// ---------------------------------------------------------------------------

/** ds_pipe_send: a host tensor (dtype, shape, bytes) to rank `peer` of comm, tag in [0, 32767]. */
inline void pipe_send(const Comm& comm, const TensorRef& tensor, int32_t peer, int32_t tag = 0) {
    detail::check(ds_pipe_send(comm.get(), tensor.get(), peer, tag));
}
/** ds_pipe_recv into a writable host tensor of the sent dtype and shape (a mismatch throws, naming both). */
inline void pipe_recv(const Comm& comm, TensorRef& tensor, int32_t peer, int32_t tag = 0) {
    detail::check(ds_pipe_recv(comm.get(), tensor.get_mutable("pipe_recv: tensor"), peer, tag));
}
inline void pipe_recv(const Comm& comm, TensorRef&& tensor, int32_t peer, int32_t tag = 0) { pipe_recv(comm, tensor, peer, tag); }

}  // namespace deepspeed_c

#endif /* DEEPSPEED_C_PIPE_HPP */

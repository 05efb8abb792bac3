// DeepSpeed's pipeline schedules (DEEPSPEED_SEMANTICS.md §8.3): for one
// stage of S, the instructions of each step of one batch of M micro-batches,
// in the order DeepSpeed's schedule.py yields them. A step is atomic: a
// barrier between steps cannot deadlock (sends are matched within a step
// pair, even and odd stages alternate their send/receive order).
//   Train (synchronous 1F1B): 2(M+S-1) steps; forward and backward steps
//     alternate, a stage's micro-batch at step t follows from t's and the
//     stage's parity; activations and gradients are sent one step after they
//     were made; the last step reduces tied and data-parallel gradients and
//     steps the optimizer. Buffers: max(2, min(S - stage, M)), micro-batch mb
//     in buffer mb mod that.
//   Inference: M+S-1 forward-only steps over two alternating buffers.
//   DataParallel: M steps of load, forward, backward; the last reduces and steps.
// Pure functions of (kind, M, S, stage): no state, any step on demand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::pipe {

// Values equal the public DS_PIPE_INSTR_* constants.
enum class InstrType : int32_t {
    LoadMicroBatch = 1,
    ForwardPass = 2,
    BackwardPass = 3,
    SendActivation = 4,
    RecvActivation = 5,
    SendGrad = 6,
    RecvGrad = 7,
    ReduceTiedGrads = 8,
    ReduceGrads = 9,
    OptimizerStep = 10,
};
// DeepSpeed's class name: "LoadMicroBatch", "ForwardPass", ...; "?" otherwise.
const char* instr_name(InstrType t);

struct Instruction {
    InstrType type;
    int32_t buffer_id;    // -1 for ReduceTiedGrads, ReduceGrads, OptimizerStep
    int32_t micro_batch;  // the micro-batch it moves or computes (sends: the previous step's); -1 for reductions
};

// Values equal the public DS_PIPE_SCHEDULE_* constants.
enum class ScheduleKind : int32_t { Train = 0, Inference = 1, DataParallel = 2 };
// "train", "inference", "data_parallel".
const char* schedule_kind_name(ScheduleKind k);

class Schedule {
public:
    // micro_batches >= 1, stages >= 1, 0 <= stage_id < stages, and the step
    // count must fit in int32; else DS_ERR_INVALID_ARGUMENT naming the argument.
    Schedule(ScheduleKind kind, int32_t micro_batches, int32_t stages, int32_t stage_id);

    ScheduleKind kind() const { return kind_; }
    int32_t micro_batches() const { return m_; }
    int32_t stages() const { return s_; }
    int32_t stage_id() const { return id_; }
    int32_t num_steps() const;
    int32_t num_pipe_buffers() const;

    // The instructions of step t in [0, num_steps()) (possibly none).
    std::vector<Instruction> step(int32_t t) const;
    // Steps of this stage with neither ForwardPass nor BackwardPass: the
    // bubble is idle_steps() / num_steps(), (S-1)/(M+S-1) for Train.
    int32_t idle_steps() const;

private:
    bool valid_mb(int64_t mb) const { return mb >= 0 && mb < m_; }
    // TrainSchedule: the micro-batch of step t (maybe outside [0, M)) and its direction.
    int64_t train_micro_batch(int64_t t, bool* forward) const;
    void train_step(int32_t t, std::vector<Instruction>* out) const;
    void inference_step(int32_t t, std::vector<Instruction>* out) const;
    void data_parallel_step(int32_t t, std::vector<Instruction>* out) const;

    ScheduleKind kind_;
    int32_t m_, s_, id_;
};

}  // namespace ds::pipe

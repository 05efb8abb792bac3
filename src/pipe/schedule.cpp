#include "pipe/schedule.h"

#include <climits>

#include "core/error.h"

namespace ds::pipe {

const char* instr_name(InstrType t) {
    switch (t) {
        case InstrType::LoadMicroBatch: return "LoadMicroBatch";
        case InstrType::ForwardPass: return "ForwardPass";
        case InstrType::BackwardPass: return "BackwardPass";
        case InstrType::SendActivation: return "SendActivation";
        case InstrType::RecvActivation: return "RecvActivation";
        case InstrType::SendGrad: return "SendGrad";
        case InstrType::RecvGrad: return "RecvGrad";
        case InstrType::ReduceTiedGrads: return "ReduceTiedGrads";
        case InstrType::ReduceGrads: return "ReduceGrads";
        case InstrType::OptimizerStep: return "OptimizerStep";
    }
    return "?";
}

const char* schedule_kind_name(ScheduleKind k) {
    switch (k) {
        case ScheduleKind::Train: return "train";
        case ScheduleKind::Inference: return "inference";
        case ScheduleKind::DataParallel: return "data_parallel";
    }
    return "?";
}

Schedule::Schedule(ScheduleKind kind, int32_t micro_batches, int32_t stages, int32_t stage_id)
    : kind_(kind), m_(micro_batches), s_(stages), id_(stage_id) {
    const auto k = static_cast<int32_t>(kind);
    DS_CHECK(k >= 0 && k <= static_cast<int32_t>(ScheduleKind::DataParallel), DS_ERR_INVALID_ARGUMENT,
             "pipe schedule: kind %d is not train (0), inference (1) or data_parallel (2)", k);
    DS_CHECK(micro_batches >= 1, DS_ERR_INVALID_ARGUMENT, "pipe schedule: micro_batches = %d must be >= 1",
             micro_batches);
    DS_CHECK(stages >= 1, DS_ERR_INVALID_ARGUMENT, "pipe schedule: stages = %d must be >= 1", stages);
    DS_CHECK(stage_id >= 0 && stage_id < stages, DS_ERR_INVALID_ARGUMENT,
             "pipe schedule: stage_id = %d is outside [0, stages = %d)", stage_id, stages);
    DS_CHECK(2 * (static_cast<int64_t>(micro_batches) + stages - 1) <= INT32_MAX, DS_ERR_INVALID_ARGUMENT,
             "pipe schedule: micro_batches = %d and stages = %d make more than %d steps", micro_batches, stages,
             INT32_MAX);
}

int32_t Schedule::num_steps() const {
    switch (kind_) {
        case ScheduleKind::Train: return 2 * (m_ + s_ - 1);
        case ScheduleKind::Inference: return m_ + s_ - 1;
        case ScheduleKind::DataParallel: return m_;
    }
    return 0;
}

int32_t Schedule::num_pipe_buffers() const {
    switch (kind_) {
        case ScheduleKind::Train: {
            const int32_t in_flight = s_ - id_ < m_ ? s_ - id_ : m_;  // forwards awaiting their backward
            return in_flight > 2 ? in_flight : 2;
        }
        case ScheduleKind::Inference: return 2;
        case ScheduleKind::DataParallel: return 1;
    }
    return 1;
}

std::vector<Instruction> Schedule::step(int32_t t) const {
    DS_CHECK(t >= 0 && t < num_steps(), DS_ERR_INVALID_ARGUMENT, "pipe schedule: step %d is outside [0, %d)", t,
             num_steps());
    std::vector<Instruction> out;
    switch (kind_) {
        case ScheduleKind::Train: train_step(t, &out); break;
        case ScheduleKind::Inference: inference_step(t, &out); break;
        case ScheduleKind::DataParallel: data_parallel_step(t, &out); break;
    }
    return out;
}

int32_t Schedule::idle_steps() const {
    int32_t idle = 0;
    for (int32_t t = 0; t < num_steps(); ++t) {
        bool compute = false;
        for (const Instruction& i : step(t))
            compute = compute || i.type == InstrType::ForwardPass || i.type == InstrType::BackwardPass;
        idle += !compute;
    }
    return idle;
}

// Even stages run forwards on even steps and backwards on odd ones, odd
// stages the reverse; stage s starts its first forward at step s and the
// last stage turns each micro-batch around in the next step.
int64_t Schedule::train_micro_batch(int64_t t, bool* forward) const {
    const bool even_t = t % 2 == 0, even_s = id_ % 2 == 0;
    *forward = even_t == even_s;
    if (even_t && even_s) return t / 2 - id_ / 2;
    if (!even_t && !even_s) return (t - 1) / 2 - id_ / 2;
    if (even_t) return t / 2 - s_ + (id_ + 1) / 2;  // odd stage, backward
    return (t - 1) / 2 - s_ + 1 + id_ / 2;          // even stage, backward
}

void Schedule::train_step(int32_t t, std::vector<Instruction>* out) const {
    bool forward = false, prev_forward = false;
    const int64_t mb = train_micro_batch(t, &forward);
    const int64_t prev = t > 0 ? train_micro_batch(t - 1, &prev_forward) : -1;
    const int32_t nbuf = num_pipe_buffers();
    const bool has_prev_stage = id_ > 0, has_next_stage = id_ < s_ - 1;
    auto add = [&](InstrType type, int64_t m) {
        out->push_back({type, static_cast<int32_t>(m % nbuf), static_cast<int32_t>(m)});
    };
    if (forward) {  // the gradient of the previous backward goes back; this forward's input arrives
        if (valid_mb(prev) && has_prev_stage) add(InstrType::SendGrad, prev);
        if (valid_mb(mb) && has_prev_stage) add(InstrType::RecvActivation, mb);
    } else {  // this backward's gradient arrives; the previous forward's output goes on
        if (valid_mb(mb) && has_next_stage) add(InstrType::RecvGrad, mb);
        if (valid_mb(prev) && has_next_stage) add(InstrType::SendActivation, prev);
    }
    if ((id_ == 0 || id_ == s_ - 1) && forward && valid_mb(mb)) add(InstrType::LoadMicroBatch, mb);  // inputs / labels
    if (valid_mb(mb)) add(forward ? InstrType::ForwardPass : InstrType::BackwardPass, mb);
    if (t == num_steps() - 1) {
        out->push_back({InstrType::ReduceTiedGrads, -1, -1});
        out->push_back({InstrType::ReduceGrads, -1, -1});
        out->push_back({InstrType::OptimizerStep, -1, -1});
    }
}

// Two buffers alternate between receiving (and computing) and sending; even
// stages send before they receive, odd stages receive first, so neighbours
// never both wait on a receive.
void Schedule::inference_step(int32_t t, std::vector<Instruction>* out) const {
    const int64_t mb = static_cast<int64_t>(t) - id_;
    const bool even = id_ % 2 == 0;
    const int32_t recv_buf = even ? t % 2 : (t + 1) % 2;
    const int32_t send_buf = even ? (t + 1) % 2 : t % 2;
    const bool has_prev_stage = id_ > 0, has_next_stage = id_ < s_ - 1;
    auto add = [&](InstrType type, int32_t buf, int64_t m) {
        out->push_back({type, buf, static_cast<int32_t>(m)});
    };
    if ((id_ == 0 || id_ == s_ - 1) && valid_mb(mb)) add(InstrType::LoadMicroBatch, recv_buf, mb);
    const bool send = has_next_stage && valid_mb(mb - 1), recv = has_prev_stage && valid_mb(mb);
    if (even) {
        if (send) add(InstrType::SendActivation, send_buf, mb - 1);
        if (recv) add(InstrType::RecvActivation, recv_buf, mb);
    } else {
        if (recv) add(InstrType::RecvActivation, recv_buf, mb);
        if (send) add(InstrType::SendActivation, send_buf, mb - 1);
    }
    if (valid_mb(mb)) add(InstrType::ForwardPass, recv_buf, mb);
}

void Schedule::data_parallel_step(int32_t t, std::vector<Instruction>* out) const {
    out->push_back({InstrType::LoadMicroBatch, 0, t});
    out->push_back({InstrType::ForwardPass, 0, t});
    out->push_back({InstrType::BackwardPass, 0, t});
    if (t == m_ - 1) {
        out->push_back({InstrType::ReduceGrads, -1, -1});
        out->push_back({InstrType::OptimizerStep, -1, -1});
    }
}

}  // namespace ds::pipe

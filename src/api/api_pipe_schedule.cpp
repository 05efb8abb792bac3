// C ABI: pipeline schedules as an iterator (ds_pipe_schedule_*). Argument
// checks, handle validation and the cursor; the schedules themselves are in
// src/pipe/schedule.cpp.
#include <mutex>
#include <vector>

#include "api/api_guard.h"
#include "api/object_handles.h"
#include "api/struct_abi.h"
#include "pipe/schedule.h"

struct ds_pipe_schedule;  // opaque: only its address is a key in the registry

using ds::api::require_arg;
using ds::pipe::Instruction;
using ds::pipe::InstrType;
using ds::pipe::Schedule;
using ds::pipe::ScheduleKind;

static_assert(sizeof(ds_pipe_instr_t) == DS_PIPE_INSTR_SIZE_V0, "ds_pipe_instr_t v0 layout is frozen");
static_assert(static_cast<int32_t>(ScheduleKind::Train) == DS_PIPE_SCHEDULE_TRAIN &&
                  static_cast<int32_t>(ScheduleKind::Inference) == DS_PIPE_SCHEDULE_INFERENCE &&
                  static_cast<int32_t>(ScheduleKind::DataParallel) == DS_PIPE_SCHEDULE_DATA_PARALLEL,
              "ScheduleKind must equal DS_PIPE_SCHEDULE_*");
static_assert(static_cast<int32_t>(InstrType::LoadMicroBatch) == DS_PIPE_INSTR_LOAD_MICRO_BATCH &&
                  static_cast<int32_t>(InstrType::ForwardPass) == DS_PIPE_INSTR_FORWARD_PASS &&
                  static_cast<int32_t>(InstrType::BackwardPass) == DS_PIPE_INSTR_BACKWARD_PASS &&
                  static_cast<int32_t>(InstrType::SendActivation) == DS_PIPE_INSTR_SEND_ACTIVATION &&
                  static_cast<int32_t>(InstrType::RecvActivation) == DS_PIPE_INSTR_RECV_ACTIVATION &&
                  static_cast<int32_t>(InstrType::SendGrad) == DS_PIPE_INSTR_SEND_GRAD &&
                  static_cast<int32_t>(InstrType::RecvGrad) == DS_PIPE_INSTR_RECV_GRAD &&
                  static_cast<int32_t>(InstrType::ReduceTiedGrads) == DS_PIPE_INSTR_REDUCE_TIED_GRADS &&
                  static_cast<int32_t>(InstrType::ReduceGrads) == DS_PIPE_INSTR_REDUCE_GRADS &&
                  static_cast<int32_t>(InstrType::OptimizerStep) == DS_PIPE_INSTR_OPTIMIZER_STEP,
              "InstrType must equal DS_PIPE_INSTR_*");

namespace {

// A schedule and the iterator's position: the current step's instructions
// and the index of the next one to return.
struct Cursor {
    explicit Cursor(const Schedule& s) : schedule(s) {}
    const Schedule schedule;
    std::mutex mu;  // ds_pipe_schedule_next / _reset from several threads
    int32_t step = 0;
    size_t index = 0;
    std::vector<Instruction> current;
    bool loaded = false;
};

ds::api::ObjectRegistry<ds_pipe_schedule, Cursor>& schedules() {
    static auto* r = new ds::api::ObjectRegistry<ds_pipe_schedule, Cursor>("pipeline schedule");  // never destroyed
    return *r;
}

std::shared_ptr<Cursor> cursor_of(const ds_pipe_schedule_t* s) { return schedules().get(s, "schedule"); }

void write_instr(const Instruction& i, int32_t step, ds_pipe_instr_t* out) {
    ds_pipe_instr_t local{};
    local.struct_size = sizeof local;
    local.type = static_cast<int32_t>(i.type);
    local.buffer_id = i.buffer_id;
    local.step = step;
    local.micro_batch = i.micro_batch;
    ds::api::write_versioned(out, DS_PIPE_INSTR_SIZE_V0, sizeof local, "out", &local);
}

}  // namespace

extern "C" {

DS_API ds_status_t ds_pipe_schedule_create(int32_t kind, int32_t micro_batches, int32_t stages, int32_t stage_id,
                                           ds_pipe_schedule_t** out) {
    return DS_GUARDED_CREATE(out, {
        Schedule s(static_cast<ScheduleKind>(kind), micro_batches, stages, stage_id);  // validates
        return schedules().add(std::make_shared<Cursor>(s));
    });
}

DS_API ds_status_t ds_pipe_schedule_next(ds_pipe_schedule_t* schedule, ds_pipe_instr_t* out, int32_t* done) {
    return DS_GUARDED({
        auto c = cursor_of(schedule);
        require_arg(out, "out");
        require_arg(done, "done");
        ds::api::checked_output_size(out, DS_PIPE_INSTR_SIZE_V0, "out");
        std::lock_guard<std::mutex> lock(c->mu);
        const int32_t steps = c->schedule.num_steps();
        while (c->step < steps) {
            if (!c->loaded) {
                c->current = c->schedule.step(c->step);
                c->index = 0;
                c->loaded = true;
            }
            if (c->index < c->current.size()) {
                write_instr(c->current[c->index], c->step, out);
                ++c->index;
                *done = 0;
                return;
            }
            ++c->step;  // this step is exhausted (or a bubble)
            c->loaded = false;
        }
        *done = 1;
    });
}

DS_API ds_status_t ds_pipe_schedule_reset(ds_pipe_schedule_t* schedule) {
    return DS_GUARDED({
        auto c = cursor_of(schedule);
        std::lock_guard<std::mutex> lock(c->mu);
        c->step = 0;
        c->index = 0;
        c->loaded = false;
        c->current.clear();
    });
}

DS_API ds_status_t ds_pipe_schedule_num_buffers(const ds_pipe_schedule_t* schedule, int32_t* out) {
    return DS_GUARDED({
        auto c = cursor_of(schedule);
        require_arg(out, "out");
        *out = c->schedule.num_pipe_buffers();
    });
}

DS_API ds_status_t ds_pipe_schedule_num_steps(const ds_pipe_schedule_t* schedule, int32_t* out) {
    return DS_GUARDED({
        auto c = cursor_of(schedule);
        require_arg(out, "out");
        *out = c->schedule.num_steps();
    });
}

DS_API ds_status_t ds_pipe_schedule_step_size(const ds_pipe_schedule_t* schedule, int32_t step, int32_t* out) {
    return DS_GUARDED({
        auto c = cursor_of(schedule);
        require_arg(out, "out");
        *out = static_cast<int32_t>(c->schedule.step(step).size());
    });
}

DS_API ds_status_t ds_pipe_schedule_instr(const ds_pipe_schedule_t* schedule, int32_t step, int32_t index,
                                          ds_pipe_instr_t* out) {
    return DS_GUARDED({
        auto c = cursor_of(schedule);
        require_arg(out, "out");
        const std::vector<Instruction> list = c->schedule.step(step);
        DS_CHECK(index >= 0 && static_cast<size_t>(index) < list.size(), DS_ERR_INVALID_ARGUMENT,
                 "argument 'index' = %d is outside [0, %zu) (the instructions of step %d)", index, list.size(), step);
        write_instr(list[static_cast<size_t>(index)], step, out);
    });
}

DS_API const char* ds_pipe_instr_name(int32_t type) {
    if (type < DS_PIPE_INSTR_LOAD_MICRO_BATCH || type > DS_PIPE_INSTR_OPTIMIZER_STEP) return "?";
    return ds::pipe::instr_name(static_cast<InstrType>(type));
}

DS_API void ds_pipe_schedule_destroy(ds_pipe_schedule_t* schedule) {
    try {
        schedules().remove(schedule);
    } catch (...) {
        // Cannot fail: nothing to report.
    }
}

}  // extern "C"

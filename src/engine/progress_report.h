// DeepSpeed's periodic progress line (steps_per_print): every
// steps_per_print optimizer boundaries, rank 0 logs at info level
//   step=<global_steps>, skipped=<skipped_steps>, lr=[<lr>], mom=[<momentum>]
// followed by what the monitors know (monitor_hub.h, progress_fields):
//   , loss=<window mean, built-in model>, loss_scale=<fp16>, samples/s=<since
//   the last line>, tokens/s=<when forwards counted tokens>, TFLOPS=<when the
//   model's FLOPs per sample are known>
// and, with comms_logger enabled, the comms logger's summary table.
// as DeepSpeed's engine does after its step (DEEPSPEED_SEMANTICS.md §5.5, item 6): the
// step counted, the lr the schedule set for the next step, and the betas as a
// tuple (adam, adamw, lamb, lion) or the momentum (SGD).
#pragma once

#include <string>

namespace ds {

class Engine;

// The line for the engine's current counters (no rank or period check).
std::string progress_line(const Engine& e);

// Called at the end of a boundary Engine::step(): logs progress_line() when
// steps_per_print is set, this is rank 0 and global_steps is a multiple of it.
void report_progress(Engine& e);

}  // namespace ds

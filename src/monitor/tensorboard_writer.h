// DeepSpeed's tensorboard monitor (DEEPSPEED_SEMANTICS.md §12): one event
// file (event_file.h) in <output_path>/<job_name>/, each event added as a
// scalar summary with tag = the event name, step = x (global_samples),
// flushed after every batch of events.
#pragma once

#include <string>

#include "monitor/event_file.h"
#include "monitor/monitor_event.h"

namespace ds::monitor {

class TensorBoardMonitor {
public:
    // Creates the directory and the event file (DS_ERR_IO naming the path).
    TensorBoardMonitor(const std::string& output_path, const std::string& job_name);
    void write_events(const Events& events);
    const std::string& log_dir() const { return dir_; }
    const std::string& file() const { return writer_.path(); }

private:
    std::string dir_;
    EventFileWriter writer_;
};

}  // namespace ds::monitor

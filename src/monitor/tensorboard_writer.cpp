#include "monitor/tensorboard_writer.h"

namespace ds::monitor {

TensorBoardMonitor::TensorBoardMonitor(const std::string& output_path, const std::string& job_name)
    : dir_(make_log_dir("tensorboard", output_path, job_name)), writer_(dir_) {}

void TensorBoardMonitor::write_events(const Events& events) {
    const double now = wall_time_now();
    for (const Event& e : events) writer_.add_scalar(e.name, static_cast<float>(e.value), e.x, now);
    writer_.flush();
}

}  // namespace ds::monitor

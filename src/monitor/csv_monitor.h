// DeepSpeed's csv_monitor (DEEPSPEED_SEMANTICS.md §12): in
// <output_path>/<job_name>/, one file per event name, named after it with
// '/' and ' ' replaced by '_' plus ".csv" (Train_Samples_lr.csv), opened in
// append mode. The first event this object writes to a file is preceded by
// the header row "step,<last '/'-component of the name>" (so a restarted job
// appends a second header, as DeepSpeed's does); then one row "x,value" per
// event, rows ending in "\r\n" (Python's csv writer), the value printed as
// Python's str(float). This layout is the contract with the readers (the
// GPT example's loss plot).
#pragma once

#include <set>
#include <string>

#include "monitor/monitor_event.h"

namespace ds::monitor {

class CsvMonitor {
public:
    // Creates the directory (DS_ERR_IO naming it when that fails).
    CsvMonitor(const std::string& output_path, const std::string& job_name);
    void write_events(const Events& events);
    const std::string& log_dir() const { return dir_; }

    // "Train_Samples_lr" for "Train/Samples/lr"; the header column "lr".
    static std::string file_stem(const std::string& name);
    static std::string header_of(const std::string& name);

private:
    std::string dir_;
    std::set<std::string> headed_;  // files this object has written a header to
};

}  // namespace ds::monitor

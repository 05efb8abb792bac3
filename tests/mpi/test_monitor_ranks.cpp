// Monitoring on several ranks (ZeRO-2, host-driven): only global rank 0
// creates the csv_monitor directory and writes its events, with x =
// global_samples of the whole world; every rank's comms logger records the
// reduction collectives ZeRO-2 runs, with a message size and a count.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/dlpack_interop.h"
#include "engine/engine.h"
#include "mpi_gtest_main.h"

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(MonitorRanks, RankZeroWritesAndEveryRankLogsItsCollectives) {
    const int rank = ds_mpi_test::world_rank(), world = ds_mpi_test::world_size();
    int pid = static_cast<int>(getpid());
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);  // one directory name for the job
    const fs::path dir = fs::temp_directory_path() / ("ds_mon_ranks_" + std::to_string(pid));
    {
        ds::EngineOptions o;
        o.log_level = DS_LOG_WARN;
        ds::Engine e(R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
                         "zero_optimization": {"stage": 2}, "optimizer": {"type": "Adam", "params": {"lr": 0.1}},
                         "comms_logger": {"enabled": true},
                         "csv_monitor": {"enabled": true, "output_path": ")" + dir.string() + R"(", "job_name": "j"}})",
                     o);
        std::vector<float> w(64, 1.0f), g(64, 0.01f);
        int64_t shape = 64;
        DLTensor t;
        std::memset(&t, 0, sizeof t);
        t.data = w.data();
        t.device = {kDLCPU, 0};
        t.ndim = 1;
        t.dtype = {kDLFloat, 32, 1};
        t.shape = &shape;
        e.add_param("w", &t, DS_PARAM_TRAINABLE);
        e.init();
        t.data = g.data();
        for (int step = 0; step < 3; ++step) {
            e.accumulate_grad("w", &t);
            e.backward(nullptr);
            e.step();
        }
        EXPECT_EQ(e.monitors().csv_dir().empty(), rank != 0);
        ASSERT_NE(e.comms_logger(), nullptr);
        EXPECT_GT(e.comms_logger()->total_ops(), 0);
        const std::string table = e.log_comms_summary();
        EXPECT_TRUE(table.find("\nall_reduce") != std::string::npos ||
                    table.find("\nreduce_scatter_tensor") != std::string::npos)
            << table;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        const int per_step = 2 * world;
        EXPECT_EQ(slurp(dir / "j" / "Train_Samples_lr.csv"),
                  "step,lr\r\n" + std::to_string(per_step) + ",0.1\r\n" + std::to_string(2 * per_step) + ",0.1\r\n" +
                      std::to_string(3 * per_step) + ",0.1\r\n");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) fs::remove_all(dir);
}

}  // namespace

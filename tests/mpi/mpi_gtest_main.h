// main() for the GoogleTest programs in tests/mpi (include it once, from the
// test's .cpp). MPI is initialised with MPI_THREAD_MULTIPLE by the "host"
// (this main), as an application embedding the library would. Rank 0 prints
// GoogleTest's full output; other ranks print only their failures, prefixed
// with the rank. Every rank exits non-zero when any rank had a failure.
#pragma once

#include <gtest/gtest.h>
#include "comm/mpi_include.h"  // <mpi.h>, C API only

#include <cstdio>

namespace ds_mpi_test {

// Prints failed assertions (with the rank) and nothing else.
class FailurePrinter : public ::testing::EmptyTestEventListener {
public:
    explicit FailurePrinter(int rank) : rank_(rank) {}
    void OnTestPartResult(const ::testing::TestPartResult& r) override {
        if (!r.failed()) return;
        std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                     r.line_number(), r.summary());
    }
    void OnTestEnd(const ::testing::TestInfo& info) override {
        if (info.result()->Failed())
            std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
    }

private:
    int rank_;
};

inline int world_rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

inline int world_size() {
    int s = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}

}  // namespace ds_mpi_test

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    ::testing::InitGoogleTest(&argc, argv);
    const int rank = ds_mpi_test::world_rank();
    if (rank != 0) {
        auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
        listeners.Append(new ds_mpi_test::FailurePrinter(rank));
    }
    int rc = RUN_ALL_TESTS() != 0 ? 1 : 0;
    int any = 0;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && any && !rc) std::fprintf(stderr, "a test failed on another rank (see [rank N] lines)\n");
    MPI_Finalize();
    return any;
}

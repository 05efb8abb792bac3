// bench_checkpoint [--dir DIR] [--params N=250000000] [--tensors T=4] [--repeat R=5]
// Save and load throughput of ds_save_checkpoint / ds_load_checkpoint for
// an fp32 model trained with AdamW (weights + fp32 master + two moments on
// disk), against the disk's plain speed measured in the same run and the same
// directory: write+fsync of as many bytes as one checkpoint holds, and a
// plain read of that file. Loads are timed twice: with the files evicted
// from the page cache (posix_fadvise DONTNEED after fsync) and warm.
// Also reports CRC32C throughput (what a load verifies per byte).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/crc32c.h"
#include "ckpt/file_io.h"
#include "deepspeed_c.h"

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void check(ds_status_t s, const char* what) {
    if (s != DS_OK) {
        std::fprintf(stderr, "%s failed: %s\n", what, ds_last_error());
        std::exit(1);
    }
}

uint64_t dir_bytes(const std::string& dir) {
    uint64_t n = 0;
    for (const std::string& f : ds::ckpt::list_dir(dir)) {
        struct stat st;
        if (stat((dir + "/" + f).c_str(), &st) == 0 && S_ISREG(st.st_mode)) n += static_cast<uint64_t>(st.st_size);
    }
    return n;
}

void evict(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

void evict_dir(const std::string& dir) {
    for (const std::string& f : ds::ckpt::list_dir(dir)) evict(dir + "/" + f);
}

constexpr size_t kChunk = size_t{64} << 20;

// Writes `bytes` bytes of `src` (as much distinct memory as a checkpoint
// holds: a save reads that much RAM too) in 64 MiB calls, then fsyncs.
double plain_write(const std::string& path, uint64_t bytes, const uint8_t* src) {
    const double t0 = now_s();
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) std::exit(1);
    for (uint64_t done = 0; done < bytes;) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, bytes - done));
        ssize_t w = write(fd, src + done, n);
        if (w <= 0) std::exit(1);
        done += static_cast<uint64_t>(w);
    }
    fsync(fd);
    close(fd);
    return now_s() - t0;
}

double plain_read(const std::string& path, uint8_t* buf) {
    const double t0 = now_s();
    int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) std::exit(1);
    while (read(fd, buf, kChunk) > 0) {
    }
    close(fd);
    return now_s() - t0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string dir = "/tmp";
    int64_t params = 250000000;
    int tensors = 4, repeat = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--dir") dir = argv[i + 1];
        else if (a == "--params") params = std::atoll(argv[i + 1]);
        else if (a == "--tensors") tensors = std::atoi(argv[i + 1]);
        else if (a == "--repeat") repeat = std::atoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    std::string root = dir + "/ds_bench_ckpt_XXXXXX";
    if (!mkdtemp(&root[0])) {
        std::perror("mkdtemp");
        return 1;
    }
    const std::string ckpt = root + "/ckpt";

    // An fp32 AdamW engine with `tensors` equal parameters and one applied
    // step, so the moments are not zero.
    ds_engine_t* e = nullptr;
    check(ds_engine_create("{\"train_micro_batch_size_per_gpu\": 1, \"gradient_clipping\": 0.0,"
                           " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}}}",
                           nullptr, &e),
          "create");
    const int64_t per = params / tensors;
    std::vector<float> init(static_cast<size_t>(per));
    for (int64_t i = 0; i < per; ++i) init[static_cast<size_t>(i)] = static_cast<float>(i % 1000) * 1e-3f - 0.5f;
    int64_t shape[1] = {per};
    DLTensor t;
    std::memset(&t, 0, sizeof t);
    t.data = init.data();
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    for (int k = 0; k < tensors; ++k)
        check(ds_engine_add_param(e, ("layer" + std::to_string(k) + ".weight").c_str(), &t, DS_PARAM_TRAINABLE), "add");
    check(ds_engine_init(e), "init");
    for (int k = 0; k < tensors; ++k)
        check(ds_engine_accumulate_grad(e, ("layer" + std::to_string(k) + ".weight").c_str(), &t), "grad");
    check(ds_backward(e, nullptr), "backward");
    check(ds_step(e, nullptr), "step");
    init.clear();
    init.shrink_to_fit();

    std::printf("checkpoint bench: %lld fp32 params in %d tensors, AdamW; directory %s\n",
                static_cast<long long>(per * tensors), tensors, root.c_str());
    // Each round: the engine's save and the disk's plain write+fsync of as
    // many bytes (from as much distinct memory), the engine's cold and warm
    // loads, and a plain cold read of as many bytes. The engine stays alive
    // throughout, so memory pressure is the same for all of them.
    // The byte count of one checkpoint: the tensors plus headers and manifest (< 1 MiB).
    const uint64_t estimate = static_cast<uint64_t>(per * tensors) * 16 + (uint64_t{1} << 20);
    std::unique_ptr<uint8_t[]> src(new uint8_t[estimate]);
    for (uint64_t i = 0; i < estimate; ++i) src[i] = static_cast<uint8_t>(i * 131u + 7u);
    std::unique_ptr<uint8_t[]> buf(new uint8_t[kChunk]);
    const std::string plain = root + "/plain.bin";
    std::vector<double> save_t, load_cold_t, load_warm_t, write_t, read_t;
    uint64_t bytes = 0;
    for (int r = 0; r < repeat; ++r) {
        const std::string tag = "bench" + std::to_string(r);
        // The save and the plain write alternate which goes first, each after
        // a sync and with the other's file already gone, so neither inherits
        // write-back or warmer page-cache memory from the other (on virtual
        // machines first use of guest memory is expensive and noisy).
        auto time_plain_write = [&] {
            ::sync();
            write_t.push_back(plain_write(plain, bytes ? bytes : estimate, src.get()));
            unlink(plain.c_str());
        };
        auto time_save = [&] {
            ::sync();
            const double t0 = now_s();
            check(ds_save_checkpoint(e, ckpt.c_str(), tag.c_str(), nullptr), "save");
            save_t.push_back(now_s() - t0);
            bytes = dir_bytes(ckpt + "/" + tag);
        };
        if (r % 2 == 0) {
            time_plain_write();
            time_save();
        } else {
            time_save();
            time_plain_write();
        }
        ::sync();
        evict_dir(ckpt + "/" + tag);
        double t0 = now_s();
        check(ds_load_checkpoint(e, ckpt.c_str(), tag.c_str(), 0, nullptr), "load");
        load_cold_t.push_back(now_s() - t0);
        t0 = now_s();
        check(ds_load_checkpoint(e, ckpt.c_str(), tag.c_str(), 0, nullptr), "load");
        load_warm_t.push_back(now_s() - t0);
        ds::ckpt::remove_tree(ckpt + "/" + tag);
        // The plain read of as many bytes, cold, for the loads to compare with.
        plain_write(plain, bytes, src.get());
        evict(plain);
        read_t.push_back(plain_read(plain, buf.get()));
        unlink(plain.c_str());
        std::printf("  round %d: write %.2f s, save %.2f s, read %.2f s, load cold %.2f s, load warm %.2f s\n", r,
                    write_t.back(), save_t.back(), read_t.back(), load_cold_t.back(), load_warm_t.back());
    }
    ds_engine_destroy(e);

    src.reset();
    // CRC32C over a 64 MiB buffer.
    for (size_t i = 0; i < kChunk; ++i) buf[i] = static_cast<uint8_t>(i * 131u + 7u);
    const double c0 = now_s();
    uint32_t crc = 0;
    for (int i = 0; i < 16; ++i) crc = ds::crc32c(crc, buf.get(), kChunk);
    const double crc_s = now_s() - c0;
    ds::ckpt::remove_tree(root);

    auto best = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    const double gb = static_cast<double>(bytes) / 1e9;
    std::printf("bytes per checkpoint: %.3f GB (model.safetensors + optim_rank0.safetensors + manifest)\n", gb);
    std::printf("%d rounds, GB/s best (median):\n", repeat);
    auto row = [&](const char* what, const std::vector<double>& t) {
        std::printf("  %-26s %6.2f (%5.2f)", what, gb / best(t), gb / median(t));
    };
    row("plain write+fsync", write_t);
    std::printf("\n");
    row("ds_save_checkpoint", save_t);
    std::printf("   = %.0f%% (%.0f%%) of plain write\n", 100.0 * best(write_t) / best(save_t),
                100.0 * median(write_t) / median(save_t));
    row("plain read, cold cache", read_t);
    std::printf("\n");
    row("ds_load_checkpoint, cold", load_cold_t);
    std::printf("   = %.0f%% (%.0f%%) of plain read\n", 100.0 * best(read_t) / best(load_cold_t),
                100.0 * median(read_t) / median(load_cold_t));
    row("ds_load_checkpoint, warm", load_warm_t);
    std::printf("   (page cache hot)\n");
    std::printf("  crc32c (%s)        %6.2f GB/s (checksum %08x)\n", ds::crc32c_impl_name(),
                16.0 * static_cast<double>(kChunk) / 1e9 / crc_s, crc);
    return 0;
}

// ds-to-fp32: consolidate a deepspeed_c checkpoint into one fp32
// safetensors file (DeepSpeed's zero_to_fp32.py). Reads checkpoints of any
// world size (fragments gathered from every optim_rank<R> file), streaming
// one parameter at a time.
//
//   ds-to-fp32 CHECKPOINT_DIR OUTPUT.safetensors [--tag TAG]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "ckpt/consolidate.h"
#include "core/error.h"

namespace {

int usage(const char* prog, int rc) {
    std::fprintf(rc ? stderr : stdout,
                 "usage: %s CHECKPOINT_DIR OUTPUT.safetensors [--tag TAG]\n"
                 "Writes every parameter of the checkpoint as fp32 into one safetensors file:\n"
                 "trainable parameters from their fp32 master weights (all ranks' fragments),\n"
                 "frozen ones from the working weights. Without --tag, CHECKPOINT_DIR/latest\n"
                 "names the checkpoint. Every file read is checked against the manifest.\n"
                 "OUTPUT must not be inside the checkpoint directory read, nor a reserved\n"
                 "checkpoint name (latest, manifest.json), nor an existing non-regular file\n"
                 "(these are refused with exit status 2).\n",
                 prog);
    return rc;
}

// A one-line bar redrawn in place (only when stderr is a terminal).
class ProgressBar {
public:
    void operator()(size_t done, size_t total, uint64_t bytes, uint64_t total_bytes) {
        const auto now = std::chrono::steady_clock::now();
        if (done != total && now - last_ < std::chrono::milliseconds(100)) return;
        last_ = now;
        const double frac = total_bytes ? static_cast<double>(bytes) / static_cast<double>(total_bytes)
                                        : static_cast<double>(done) / static_cast<double>(total ? total : 1);
        const int width = 40, fill = static_cast<int>(frac * width + 0.5);
        std::fprintf(stderr, "\r[%.*s%*s] %3d%%  %zu/%zu params  %.1f/%.1f MB", fill,
                     "########################################", width - fill, "", static_cast<int>(frac * 100),
                     done, total, static_cast<double>(bytes) / 1e6, static_cast<double>(total_bytes) / 1e6);
        if (done == total) std::fputc('\n', stderr);
        std::fflush(stderr);
    }

private:
    std::chrono::steady_clock::time_point last_{};
};

}  // namespace

int main(int argc, char** argv) {
    std::string positional[2], tag;
    int npos = 0;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) return usage(argv[0], 0);
        if (std::strcmp(argv[i], "--tag") == 0) {
            if (i + 1 >= argc) return usage(argv[0], 2);
            tag = argv[++i];
            if (tag.empty()) return usage(argv[0], 2);
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            std::fprintf(stderr, "%s: unknown option '%s'\n", argv[0], argv[i]);
            return usage(argv[0], 2);
        } else if (npos < 2) {
            positional[npos++] = argv[i];
        } else {
            return usage(argv[0], 2);
        }
    }
    if (npos != 2) return usage(argv[0], 2);
    try {
        ds::ckpt::ConsolidateProgress progress;
        if (::isatty(STDERR_FILENO)) progress = ProgressBar();
        const ds::ckpt::ConsolidateStats s = ds::ckpt::consolidate_fp32(positional[0], tag, positional[1], progress);
        std::printf("%s: tag %s, %zu parameters, %llu bytes (peak buffer %llu bytes)\n", positional[1].c_str(),
                    s.tag.c_str(), s.params, static_cast<unsigned long long>(s.output_bytes),
                    static_cast<unsigned long long>(s.peak_buffer_bytes));
        return 0;
    } catch (const ds::Error& e) {
        if (e.status() == DS_ERR_INVALID_ARGUMENT) {  // a bad command line (e.g. an OUTPUT that would destroy input)
            std::fprintf(stderr, "ds-to-fp32: error: %s\n", e.what());
            return 2;
        }
        std::fprintf(stderr, "%s: %s: %s\n", argv[0], ds_status_string(e.status()), e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
        return 1;
    }
}

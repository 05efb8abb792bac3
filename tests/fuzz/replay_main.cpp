// Driver for a fuzz target's LLVMFuzzerTestOneInput without libFuzzer:
//
//   replay_main CORPUS_DIR [--mutate-seconds N] [--seed S]
//
// First replays every corpus file (CORPUS_DIR may also be a file; several
// may be given), in name order: the corpus as a normal test. With
// --mutate-seconds N it then, for N seconds, feeds the target mutants of the
// corpus: bit flips, byte insertions and deletions, chunk duplication,
// splices of two entries, interesting values (boundary integers, JSON
// tokens, escapes) and chunks copied from other entries, stacked 1-8 deep
// (mostly 1-2); some mutants the target did not reject (it returned 0, not
// -1) join the pool so mutations compound. The i-th input depends
// only on the corpus and the seed (default 1), so a run is reproducible; the
// time only decides how many inputs run. Prints the number of executions.
//
// A crash (signal, or a sanitizer's report) writes the input being run to
// ./fuzz-crash-input and says so; an input that takes more than 2 s of CPU
// time is written to ./fuzz-slow-input and fails the run (exit 1): both are
// bugs. CPU time, not wall time: on a loaded machine (2 cores, a build
// beside the test) a 30-microsecond input can wait seconds for a core.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));

namespace {

// This thread's CPU time (user + system), in seconds.
double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

using Bytes = std::vector<uint8_t>;

void collect(const std::string& path, std::vector<std::string>& out) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return;
    if (!S_ISDIR(st.st_mode)) {
        if (S_ISREG(st.st_mode)) out.push_back(path);
        return;
    }
    if (DIR* d = opendir(path.c_str())) {
        while (dirent* e = readdir(d))
            if (e->d_name[0] != '.') collect(path + "/" + e->d_name, out);
        closedir(d);
    }
}

// ---- the input being run, for the crash handlers ---------------------------

const uint8_t* g_data = nullptr;
size_t g_size = 0;

void save_input(const char* name) {
    const int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    size_t off = 0;
    while (off < g_size) {
        const ssize_t n = write(fd, g_data + off, g_size - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
    }
    close(fd);
}

void on_death() {
    if (!g_data) return;
    save_input("fuzz-crash-input");
    const char msg[] = "\nreplay_main: the crashing input was written to ./fuzz-crash-input\n";
    (void)!write(2, msg, sizeof msg - 1);
}

void on_signal(int sig) {
    on_death();
    signal(sig, SIG_DFL);
    raise(sig);
}

int run_one(const Bytes& b) {
    g_data = b.data();
    g_size = b.size();
    const int rc = LLVMFuzzerTestOneInput(b.data(), b.size());
    g_data = nullptr;
    return rc;
}

// ---- mutations ---------------------------------------------------------------

class Mutator {
public:
    Mutator(uint64_t seed, size_t max_size) : rng_(seed), max_size_(max_size) {}

    size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }

    Bytes mutate(const std::vector<Bytes>& pool) {
        Bytes b = pool[below(pool.size())];
        size_t depth = 1;  // 1 half the time, 2 a quarter, ... up to 8: text formats break fast
        while (depth < 8 && below(2) == 0) ++depth;
        for (size_t i = 0; i < depth; ++i) once(b, pool);
        if (b.size() > max_size_) b.resize(max_size_);
        return b;
    }

private:
    void once(Bytes& b, const std::vector<Bytes>& pool) {
        switch (below(11)) {
            case 0:  // flip a bit
                if (!b.empty()) b[below(b.size())] ^= static_cast<uint8_t>(1u << below(8));
                break;
            case 1:  // set a byte to a random or interesting value
                if (!b.empty()) b[below(b.size())] = interesting_byte();
                break;
            case 2: {  // insert 1-4 bytes
                const size_t n = 1 + below(4);
                const size_t at = below(b.size() + 1);
                for (size_t k = 0; k < n; ++k) b.insert(b.begin() + static_cast<long>(at), interesting_byte());
                break;
            }
            case 3: {  // delete a range
                if (b.empty()) break;
                const size_t at = below(b.size());
                const size_t n = 1 + below(std::min<size_t>(b.size() - at, 16));
                b.erase(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
                break;
            }
            case 4: {  // duplicate a chunk somewhere
                if (b.empty()) break;
                const size_t from = below(b.size());
                const size_t n = 1 + below(std::min<size_t>(b.size() - from, 64));
                const Bytes chunk(b.begin() + static_cast<long>(from), b.begin() + static_cast<long>(from + n));
                const size_t reps = below(4) == 0 ? 1 + below(32) : 1;
                const size_t at = below(b.size() + 1);
                for (size_t r = 0; r < reps; ++r) b.insert(b.begin() + static_cast<long>(at), chunk.begin(), chunk.end());
                break;
            }
            case 5: {  // splice: a prefix of this entry and a suffix of another
                const Bytes& o = pool[below(pool.size())];
                const size_t cut = below(b.size() + 1);
                const size_t ocut = below(o.size() + 1);
                b.resize(cut);
                b.insert(b.end(), o.begin() + static_cast<long>(ocut), o.end());
                break;
            }
            case 6: {  // copy a chunk of another entry in (keys, values, headers)
                const Bytes& o = pool[below(pool.size())];
                if (o.empty()) break;
                const size_t from = below(o.size());
                const size_t n = 1 + below(std::min<size_t>(o.size() - from, 48));
                const size_t at = below(b.size() + 1);
                b.insert(b.begin() + static_cast<long>(at), o.begin() + static_cast<long>(from),
                         o.begin() + static_cast<long>(from + n));
                break;
            }
            case 7: {  // an interesting token (text), replacing or inserted
                static const char* const tokens[] = {
                    "0", "-1", "1", "2", "-0", "0.0", "1e308", "-1e308", "1e-400", "4e-324", "1e999",
                    "9223372036854775807", "9223372036854775808", "-9223372036854775809", "18446744073709551616",
                    "2147483648", "4294967296", "4611686018427387904", "9007199254740993", "0.5", "1.0000000000000002",
                    "true", "false", "null", "\"auto\"", "\"\"", "{}", "[]", "[[[[[[[[", "]]]]", "{\"a\":{\"b\":{",
                    "\\u0000", "\\ud800", "\\udc00", "\\ud83d\\ude00", "\\\"", "\\\\", "\\x", "\xc3\xa9", "\xff",
                    "\xed\xa0\x80", "\xef\xbb\xbf", "\t", "\n", "\r\n", ",", ":", "\"", "NaN", "Infinity", "/*"};
                const char* t = tokens[below(sizeof tokens / sizeof tokens[0])];
                const size_t len = std::strlen(t);
                const size_t at = below(b.size() + 1);
                if (below(2) == 0 && at < b.size()) {
                    const size_t n = 1 + below(std::min<size_t>(b.size() - at, 8));
                    b.erase(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
                }
                b.insert(b.begin() + static_cast<long>(at), t, t + len);
                break;
            }
            case 9:
            case 10:  // JSON text: a scalar value replaced by another valid one
                replace_json_scalar(b);
                break;
            case 8: {  // an interesting binary integer (little-endian), overwriting
                static const uint64_t values[] = {0,          1,          0x7f,       0x80,       0xff,
                                                  0x7fff,     0x8000,     0xffff,     0x7fffffff, 0x80000000,
                                                  0xffffffff, 1ull << 32, 1ull << 53, 1ull << 62, 0x7fffffffffffffffull,
                                                  0x8000000000000000ull, ~0ull};
                const uint64_t v = values[below(sizeof values / sizeof values[0])];
                const size_t width = size_t{1} << below(4);  // 1, 2, 4 or 8 bytes
                if (b.size() < width) break;
                const size_t at = below(b.size() - width + 1);
                for (size_t k = 0; k < width; ++k) b[at + k] = static_cast<uint8_t>(v >> (8 * k));
                break;
            }
        }
    }

    // Finds a JSON scalar (after ':', ',' or '[') from a random position and
    // replaces it with a value of another type or an edge value, so the text
    // stays JSON and the mutant reaches the checks past the syntax.
    void replace_json_scalar(Bytes& b) {
        static const char* const values[] = {
            "0", "1", "-1", "2", "3", "4", "8", "63", "64", "65", "127", "128", "1000", "0.5", "1.5", "-0.5",
            "1e9", "5e8", "1e-8", "1e300", "-1e300", "2147483647", "4294967296", "4294967297",
            "9007199254740992", "9007199254740993", "9223372036854775807", "-9223372036854775808",
            "1e19", "true", "false", "null", "\"auto\"", "\"\"", "\"none\"", "\"cpu\"", "\"nvme\"",
            "\"fp32\"", "\"bf16\"", "\"fp16\"", "\"adam\"", "\"SGD\"", "\"lamb\"", "\"WarmupLR\"",
            "\"OneCycle\"", "\"linear\"", "\"sum\"", "{}", "[]", "[0.9, 0.999]", "[1, 1]", "[2]",
            "{\"enabled\": true}", "{\"enabled\": false}", "{\"device\": \"cpu\"}"};
        if (b.empty()) return;
        size_t i = below(b.size());
        for (; i < b.size(); ++i) {
            if (b[i] != ':' && b[i] != ',' && b[i] != '[') continue;
            size_t v = i + 1;
            while (v < b.size() && (b[v] == ' ' || b[v] == '\n' || b[v] == '\t' || b[v] == '\r')) ++v;
            if (v >= b.size()) return;
            size_t e = v;
            if (b[v] == '"') {
                for (e = v + 1; e < b.size() && b[e] != '"'; ++e)
                    if (b[e] == '\\') ++e;
                if (e >= b.size()) return;
                ++e;
            } else if (b[v] == '-' || (b[v] >= '0' && b[v] <= '9') || b[v] == 't' || b[v] == 'f' || b[v] == 'n') {
                while (e < b.size() && b[e] != ',' && b[e] != '}' && b[e] != ']' && b[e] != ' ' && b[e] != '\n') ++e;
            } else {
                continue;  // an object or array: look further
            }
            if (b[v] == '"' && e < b.size() && (b[e] == ':' || (e + 1 < b.size() && b[e + 1] == ':'))) continue;  // a key
            const char* t = values[below(sizeof values / sizeof values[0])];
            b.erase(b.begin() + static_cast<long>(v), b.begin() + static_cast<long>(e));
            b.insert(b.begin() + static_cast<long>(v), t, t + std::strlen(t));
            return;
        }
    }

    uint8_t interesting_byte() {
        static const uint8_t bytes[] = {0, 0xff, 0x7f, 0x80, 0xc0, 0xed, 0xf4, '"', '\\', '{', '}', '[', ']',
                                        ',', ':', '0', '9', '-', 'e', '.', ' ', '\n', 'u'};
        return below(2) ? static_cast<uint8_t>(rng_()) : bytes[below(sizeof bytes)];
    }

    std::mt19937_64 rng_;
    size_t max_size_;
};

int usage() {
    std::fprintf(stderr, "usage: replay_main CORPUS_DIR [--mutate-seconds N] [--seed S]\n");
    return 2;
}

bool parse_u64(const char* s, unsigned long long& out) {
    if (!s || !*s) return false;
    char* end = nullptr;
    out = std::strtoull(s, &end, 10);
    return *end == '\0' && s[0] != '-';
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> files;
    unsigned long long seconds = 0, seed = 1;
    bool have_corpus = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--mutate-seconds" || a == "--seed") {
            if (i + 1 >= argc || !parse_u64(argv[i + 1], a == "--seed" ? seed : seconds)) return usage();
            ++i;
        } else if (a.rfind("--", 0) == 0) {
            return usage();
        } else {
            collect(a, files);
            have_corpus = true;
        }
    }
    if (!have_corpus) return usage();
    std::sort(files.begin(), files.end());
    if (files.empty()) {
        std::fprintf(stderr, "no corpus files found\n");
        return 1;
    }
    if (__sanitizer_set_death_callback)  // a sanitizer build: keep its own signal handlers and reports
        __sanitizer_set_death_callback(on_death);
    else
        for (int sig : {SIGSEGV, SIGABRT, SIGILL, SIGTRAP, SIGBUS, SIGFPE}) signal(sig, on_signal);

    std::vector<Bytes> pool;
    size_t largest = 0;
    for (const std::string& f : files) {
        std::ifstream in(f, std::ios::binary);
        pool.emplace_back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        largest = std::max(largest, pool.back().size());
        run_one(pool.back());
    }
    std::printf("%zu corpus inputs replayed without a crash\n", files.size());
    if (seconds == 0) return 0;

    using Clock = std::chrono::steady_clock;
    const size_t corpus_size = pool.size();
    const size_t max_pool = corpus_size + 1000;
    Mutator m(seed, std::max<size_t>(65536, 2 * largest));
    const auto end = Clock::now() + std::chrono::seconds(seconds);
    unsigned long long execs = 0, slow = 0;
    while (Clock::now() < end) {
        Bytes b = m.mutate(pool);
        const double t0 = thread_cpu_seconds();
        const int rc = run_one(b);
        ++execs;
        if (thread_cpu_seconds() - t0 > 2.0 && slow++ == 0) {
            g_data = b.data();
            g_size = b.size();
            save_input("fuzz-slow-input");
            g_data = nullptr;
            std::fprintf(stderr, "replay_main: an input took more than 2 s of CPU time; written to ./fuzz-slow-input\n");
        }
        // Keep some mutants so mutations compound (1 in 8; the pool is
        // bounded). A target returns -1 (libFuzzer's "do not add to the
        // corpus") for inputs not worth building on, e.g. a syntax error.
        if (rc == 0 && m.below(8) == 0) {
            if (pool.size() < max_pool)
                pool.push_back(std::move(b));
            else
                pool[corpus_size + m.below(max_pool - corpus_size)] = std::move(b);
        }
    }
    std::printf("%llu mutated inputs executed in %llu s (seed %llu) without a crash%s\n", execs, seconds, seed,
                slow ? "; some were slow" : "");
    return slow ? 1 : 0;
}

// MoE gating (kernels/nn_moe.h): the CPU kernel and the float64 reference
// against DeepSpeed's own top1gating/top2gating output (tests/data/moe/
// gating.txt, written by tests/tools/gen_moe_fixtures.py), plus property
// tests of the random options and argument checks.
//
// Tolerances: routing (expert, slot, capacity, exp_counts) exactly; weights
// and l_aux 2e-6 absolute (fp32 softmax vs torch's, a few ulps); d logits
// 2e-5 absolute + 1e-4 relative (fp32 sums of O(1) terms).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nn_moe.h"

namespace {

struct Case {
    size_t S = 0, E = 0;
    dsk_moe_gate_args args{};
    std::vector<double> logits, g_up, dlogits;
    double a_up = 0.0, l_aux = 0.0;
    int64_t capacity = 0;
    std::vector<int64_t> counts;
    std::vector<int32_t> expert, slot;
    std::vector<double> weight;
};

std::vector<Case> load_cases() {
    std::ifstream in(std::string(DS_TEST_DATA_DIR) + "/moe/gating.txt");
    EXPECT_TRUE(in.good()) << "tests/data/moe/gating.txt missing";
    std::vector<Case> cases;
    std::string line;
    Case c;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ss(line.substr(1));
        switch (line[0]) {
        case 'C': {
            c = Case();
            int k, drop, rts, rs, second;
            ss >> c.S >> c.E >> k >> c.args.capacity_factor >> c.args.min_capacity >> drop >> rts >> rs >> second >>
                c.args.key.seed >> c.args.key.stream >> c.args.key.module_id >> c.args.key.offset;
            c.args.k = k;
            c.args.drop_tokens = drop;
            c.args.use_rts = rts;
            c.args.rsample = rs;
            c.args.second_sampling = second;
            break;
        }
        case 'L': for (double v; ss >> v;) c.logits.push_back(v); break;
        case 'G': for (double v; ss >> v;) c.g_up.push_back(v); break;
        case 'A': ss >> c.a_up; break;
        case 'O': ss >> c.capacity >> c.l_aux; break;
        case 'X': for (int64_t v; ss >> v;) c.counts.push_back(v); break;
        case 'R':
            for (int32_t e, s; ss >> e >> s;) {
                double w;
                ss >> w;
                c.expert.push_back(e);
                c.slot.push_back(s);
                c.weight.push_back(w);
            }
            break;
        case 'D': for (double v; ss >> v;) c.dlogits.push_back(v); break;
        case 'E': cases.push_back(c); break;
        default: ADD_FAILURE() << "bad fixture line: " << line;
        }
    }
    return cases;
}

std::string label(const Case& c, size_t i) {
    std::ostringstream o;
    o << "case " << i << " (S=" << c.S << " E=" << c.E << " k=" << c.args.k << " cf=" << c.args.capacity_factor
      << " min=" << c.args.min_capacity << " drop=" << c.args.drop_tokens << " rts=" << c.args.use_rts
      << " rsample=" << c.args.rsample << " second=" << c.args.second_sampling << ")";
    return o.str();
}

// Compares one implementation's outputs (already in double) with DeepSpeed's.
void expect_matches(const Case& c, const std::string& who, int64_t cap, double l_aux,
                    const std::vector<int64_t>& counts, const std::vector<int32_t>& expert,
                    const std::vector<int32_t>& slot, const std::vector<double>& weight,
                    const std::vector<double>& dlogits) {
    EXPECT_EQ(cap, c.capacity) << who;
    EXPECT_NEAR(l_aux, c.l_aux, 2e-6) << who;
    EXPECT_EQ(counts, c.counts) << who;
    for (size_t r = 0; r < c.expert.size(); ++r) {
        EXPECT_EQ(slot[r], c.slot[r]) << who << " route " << r;
        if (c.slot[r] >= 0) EXPECT_EQ(expert[r], c.expert[r]) << who << " route " << r;
        EXPECT_NEAR(weight[r], c.weight[r], 2e-6) << who << " route " << r;
    }
    for (size_t i = 0; i < c.dlogits.size(); ++i)
        EXPECT_NEAR(dlogits[i], c.dlogits[i], 2e-5 + 1e-4 * std::fabs(c.dlogits[i])) << who << " dlogits " << i;
}

TEST(MoeGating, CpuKernelMatchesDeepSpeed) {
    const auto cases = load_cases();
    ASSERT_GE(cases.size(), 10u);
    for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        const size_t routes = c.S * static_cast<size_t>(c.args.k);
        std::vector<float> logits(c.logits.begin(), c.logits.end()), probs(c.S * c.E), w(routes), dl(c.S * c.E);
        std::vector<float> g(c.g_up.begin(), c.g_up.end());
        std::vector<int32_t> ex(routes), sl(routes);
        std::vector<int64_t> counts(c.E);
        int64_t cap = 0;
        float aux = 0.0f;
        ASSERT_EQ(dsk_cpu_moe_gate_fwd(logits.data(), c.S, c.E, &c.args, probs.data(), ex.data(), sl.data(), w.data(),
                                       counts.data(), &cap, &aux),
                  DSK_OK)
            << dsk_last_error();
        ASSERT_EQ(dsk_cpu_moe_gate_bwd(probs.data(), c.S, c.E, c.args.k, ex.data(), sl.data(), g.data(),
                                       static_cast<float>(c.a_up), dl.data()),
                  DSK_OK)
            << dsk_last_error();
        expect_matches(c, "cpu " + label(c, i), cap, aux, counts, ex, sl, std::vector<double>(w.begin(), w.end()),
                       std::vector<double>(dl.begin(), dl.end()));
    }
}

TEST(MoeGating, ReferenceMatchesDeepSpeed) {
    const auto cases = load_cases();
    for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        const size_t routes = c.S * static_cast<size_t>(c.args.k);
        std::vector<double> probs(c.S * c.E), w(routes), dl(c.S * c.E);
        std::vector<int32_t> ex(routes), sl(routes);
        std::vector<int64_t> counts(c.E);
        int64_t cap = 0;
        double aux = 0.0;
        dsk_ref_moe_gate_fwd(c.logits.data(), c.S, c.E, &c.args, probs.data(), ex.data(), sl.data(), w.data(),
                             counts.data(), &cap, &aux);
        dsk_ref_moe_gate_bwd(probs.data(), c.S, c.E, c.args.k, ex.data(), sl.data(), c.g_up.data(), c.a_up,
                             dl.data());
        expect_matches(c, "ref " + label(c, i), cap, aux, counts, ex, sl, w, dl);
    }
}

// ---- properties of the random options ----------------------------------

struct Out {
    std::vector<float> probs, w;
    std::vector<int32_t> ex, sl;
    std::vector<int64_t> counts;
    int64_t cap = 0;
    float aux = 0.0f;
};

Out gate(const std::vector<float>& logits, size_t S, size_t E, const dsk_moe_gate_args& a) {
    Out o;
    const size_t routes = S * static_cast<size_t>(a.k);
    o.probs.resize(S * E);
    o.w.resize(routes);
    o.ex.resize(routes);
    o.sl.resize(routes);
    o.counts.resize(E);
    EXPECT_EQ(dsk_cpu_moe_gate_fwd(logits.data(), S, E, &a, o.probs.data(), o.ex.data(), o.sl.data(), o.w.data(),
                                   o.counts.data(), &o.cap, &o.aux),
              DSK_OK)
        << dsk_last_error();
    return o;
}

std::vector<float> some_logits(size_t S, size_t E, uint64_t seed) {
    dsk_dropout_key key{};
    key.seed = seed;
    std::vector<float> l(S * E);
    for (size_t i = 0; i < l.size(); ++i) l[i] = 3.0f * (dsk_moe_uniform(&key, i) - 0.5f);
    return l;
}

// Every kept route's slot is < capacity, slots of one expert are distinct,
// and each expert keeps min(count, capacity) first-choice tokens (top-1).
void expect_capacity_respected(const Out& o, size_t S, size_t E, int k) {
    std::vector<std::set<int32_t>> used(E);
    std::vector<int64_t> kept(E, 0);
    for (size_t r = 0; r < S * static_cast<size_t>(k); ++r) {
        if (o.sl[r] < 0) {
            EXPECT_EQ(o.w[r], 0.0f);
            continue;
        }
        EXPECT_LT(o.sl[r], o.cap);
        EXPECT_TRUE(used[static_cast<size_t>(o.ex[r])].insert(o.sl[r]).second) << "slot used twice";
        kept[static_cast<size_t>(o.ex[r])] += 1;
    }
    if (k == 1)
        for (size_t e = 0; e < E; ++e) EXPECT_EQ(kept[e], std::min<int64_t>(o.counts[e], o.cap)) << "expert " << e;
}

TEST(MoeGating, RandomTokenSelectionKeepsCapacityAndIsSeeded) {
    const size_t S = 64, E = 4;
    const auto logits = some_logits(S, E, 5);
    dsk_moe_gate_args a{};
    a.k = 1;
    a.drop_tokens = 1;
    a.use_rts = 1;
    a.capacity_factor = 0.5;
    a.key.seed = 42;
    const Out x = gate(logits, S, E, a), y = gate(logits, S, E, a);
    expect_capacity_respected(x, S, E, 1);
    EXPECT_EQ(x.sl, y.sl);  // deterministic for a key
    a.use_rts = 0;
    const Out pos = gate(logits, S, E, a);
    expect_capacity_respected(pos, S, E, 1);
    EXPECT_NE(x.sl, pos.sl) << "RTS kept the same tokens as token order: the priorities are not used";
    a.use_rts = 1;
    a.key.stream = 1;
    const Out z = gate(logits, S, E, a);
    EXPECT_NE(x.sl, z.sl) << "another forward draws other priorities";
    EXPECT_EQ(x.counts, z.counts);  // selection is the same: only which tokens survive changes
}

TEST(MoeGating, RSampleChangesOnlyTheSelection) {
    const size_t S = 48, E = 6;
    const auto logits = some_logits(S, E, 9);
    dsk_moe_gate_args a{};
    a.k = 1;
    a.drop_tokens = 0;
    a.capacity_factor = 1.0;
    a.key.seed = 3;
    const Out plain = gate(logits, S, E, a);
    a.rsample = 1;
    const Out noisy = gate(logits, S, E, a), again = gate(logits, S, E, a);
    EXPECT_EQ(noisy.ex, again.ex);
    EXPECT_EQ(noisy.probs, plain.probs);  // gates are the noise-free softmax
    EXPECT_NE(noisy.ex, plain.ex);
    size_t changed = 0;
    for (size_t s = 0; s < S; ++s) {
        // the weight is the noise-free probability of whichever expert was picked
        EXPECT_EQ(noisy.w[s], noisy.probs[s * E + static_cast<size_t>(noisy.ex[s])]);
        changed += noisy.ex[s] != plain.ex[s];
    }
    EXPECT_GT(changed, 0u);
    expect_capacity_respected(noisy, S, E, 1);
}

TEST(MoeGating, TopTwoCapacityAndSecondSampling) {
    const size_t S = 40, E = 5;
    const auto logits = some_logits(S, E, 11);
    dsk_moe_gate_args a{};
    a.k = 2;
    a.drop_tokens = 1;
    a.capacity_factor = 0.5;
    a.key.seed = 8;
    const Out plain = gate(logits, S, E, a);
    expect_capacity_respected(plain, S, E, 2);
    a.second_sampling = 1;
    const Out s1 = gate(logits, S, E, a), s2 = gate(logits, S, E, a);
    expect_capacity_respected(s1, S, E, 2);
    EXPECT_EQ(s1.ex, s2.ex);
    bool second_changed = false;
    for (size_t s = 0; s < S; ++s) {
        EXPECT_EQ(s1.ex[2 * s], plain.ex[2 * s]);  // the first choice never takes noise
        EXPECT_NE(s1.ex[2 * s], s1.ex[2 * s + 1]);
        second_changed |= s1.ex[2 * s + 1] != plain.ex[2 * s + 1];
    }
    EXPECT_TRUE(second_changed);
}

TEST(MoeGating, BadArgumentsNameTheArgument) {
    std::vector<float> l(8, 0.0f), p(8), w(8), dl(8);
    std::vector<int32_t> ex(8), sl(8);
    std::vector<int64_t> cnt(4);
    int64_t cap;
    float aux;
    dsk_moe_gate_args a{};
    a.k = 3;
    a.capacity_factor = 1.0;
    EXPECT_EQ(dsk_cpu_moe_gate_fwd(l.data(), 2, 4, &a, p.data(), ex.data(), sl.data(), w.data(), cnt.data(), &cap,
                                   &aux),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("k = 3"), std::string::npos) << dsk_last_error();
    a.k = 1;
    a.min_capacity = 4;
    EXPECT_EQ(dsk_cpu_moe_gate_fwd(l.data(), 2, 4, &a, p.data(), ex.data(), sl.data(), w.data(), cnt.data(), &cap,
                                   &aux),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("min_capacity"), std::string::npos) << dsk_last_error();
    a.min_capacity = 0;
    a.capacity_factor = -1.0;
    EXPECT_EQ(dsk_cpu_moe_gate_fwd(l.data(), 2, 4, &a, p.data(), ex.data(), sl.data(), w.data(), cnt.data(), &cap,
                                   &aux),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("capacity_factor"), std::string::npos) << dsk_last_error();
    a.capacity_factor = 1.0;
    l[5] = NAN;
    EXPECT_EQ(dsk_cpu_moe_gate_fwd(l.data(), 2, 4, &a, p.data(), ex.data(), sl.data(), w.data(), cnt.data(), &cap,
                                   &aux),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("logits[1, 1]"), std::string::npos) << dsk_last_error();
    a.k = 2;
    l[5] = 0.0f;
    EXPECT_EQ(dsk_cpu_moe_gate_fwd(l.data(), 8, 1, &a, p.data(), ex.data(), sl.data(), w.data(), cnt.data(), &cap,
                                   &aux),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("at least 2 experts"), std::string::npos) << dsk_last_error();
    ex[0] = 7;
    EXPECT_EQ(dsk_cpu_moe_gate_bwd(p.data(), 2, 4, 1, ex.data(), sl.data(), w.data(), 1.0f, dl.data()),
              DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("expert[0] = 7"), std::string::npos) << dsk_last_error();
}

}  // namespace

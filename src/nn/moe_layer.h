// MoeLayer: DeepSpeed's MoE layer (deepspeed/moe/layer.py MoE with
// sharded_moe.py TopKGate + MOELayer) as a Module on [..., C]:
//   gate:    logits = x W_g^T (bias-free Linear C -> E, fp32 products);
//            Jitter (training): x multiplied by U(0.99, 1.01) first (per
//            element, kernels/nn_moe.h dsk_cpu_moe_jitter, on the run's device);
//   gating:  top-1 / top-2 (kernels/nn_moe.h): expert, slot, weight per route;
//   experts: E copies of the GPT's MLP (Mlp), each run on the tokens it kept;
//   combine: y[s] = sum over the token's kept routes of weight * expert(x[s]);
//   use_residual (PR-MoE): y = y * c0 + mlp(x) * c1, (c0, c1) = softmax(Linear(C -> 2)(x)).
// The auxiliary load-balancing loss l_aux of the last forward is read by the
// model's loss (MoeAuxLoss below), which adds aux_loss_coef * l_aux and sets
// each layer's d l_aux before the model's backward runs.
// Parameter names follow DeepSpeed's state dict under the layer's prefix:
// deepspeed_moe.gate.wg.weight, deepspeed_moe.experts.deepspeed_experts.<j>.
// c_fc/c_proj.*, mlp.* and coefficient.* (use_residual).
// Expert parallelism: nn/moe_ep.h's shard_moe_layer splits the experts over
// an expert group (all-to-all dispatch and combine); MoeConfig::ep_size > 1
// stays DS_ERR_UNSUPPORTED here (the engine, which owns the groups, decides).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/ep_group.h"
#include "nn/layer_util.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/model.h"
#include "nn/module.h"
#include "nn_moe.h"

namespace ds::nn {

// The layer's options, DeepSpeed's MoE() defaults.
struct MoeConfig {
    int64_t num_experts = 1;
    int64_t ep_size = 1;
    int k = 1;
    double capacity_factor = 1.0;
    double eval_capacity_factor = 1.0;
    int64_t min_capacity = 4;
    enum class Noise { None, Jitter, RSample } noisy_gate_policy = Noise::None;
    bool drop_tokens = true;
    bool use_rts = true;
    bool use_residual = false;
    bool top2_2nd_expert_sampling = true;
};

// DS_ERR_INVALID_ARGUMENT naming the field (ep_size > 1: DS_ERR_UNSUPPORTED).
void validate(const MoeConfig& c);

class MoeLayer : public Module {
public:
    // The experts (and the residual MLP) are Mlp(hidden, inner, pdrop, bias).
    MoeLayer(const MoeConfig& cfg, int64_t hidden, int64_t inner, float pdrop, bool bias);

    const char* type() const override { return "MoE"; }
    std::vector<Module*> children() override;
    Tensor forward(const Tensor& x, RunContext& ctx) override;
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    void clear_saved() override;

    // Names this module `prefix` without its dot and the parameters as above.
    void set_names(const std::string& prefix);
    // Weights ~ normal(0, std_in) (c_proj: std_out), biases 0; the experts and
    // the residual MLP start as copies of expert 0 (DeepSpeed deep-copies the
    // expert module it is given).
    void init_params(uint64_t seed, double std_in, double std_out);

    const MoeConfig& config() const { return cfg_; }
    // The last forward's auxiliary loss and routes per expert (before dropping).
    float l_aux() const { return l_aux_; }
    const std::vector<int64_t>& exp_counts() const { return counts_; }
    int64_t capacity() const { return capacity_; }
    // d loss / d l_aux for the next backward (0 unless a loss sets it).
    void set_aux_grad(float g) { aux_grad_ = g; }

    Linear& gate() { return *gate_; }
    // Local expert j: global expert first_expert() + j (all of them, from 0,
    // until shard_moe_layer keeps this rank's).
    Mlp& expert(size_t j) { return *experts_[j]; }
    size_t num_local_experts() const { return experts_.size(); }
    int64_t first_expert() const { return first_expert_; }
    const EpGroup& ep_group() const { return ep_; }

    // Keeps experts [g.rank*E/g.size, (g.rank+1)*E/g.size) and destroys the
    // others; forward and backward then exchange tokens over g. Called by
    // shard_moe_layer (nn/moe_ep.h), which checks g and the layer first.
    void keep_local_experts(const EpGroup& g);
    // A sharded layer that runs on a GPU exchanges its token blocks over `c`
    // (device buffers, the group's ranks in the same order; moe_ep_device.cpp).
    // DS_ERR_INVALID_STATE if the layer is not sharded, DS_ERR_INVALID_ARGUMENT
    // if c's rank or size differ from the group's.
    void use_device_exchange(comm::Communicator* c);

private:
    void drop_saved();
    // The gating on host logits [S, E] (kernels/nn_moe.h): fills probs_,
    // expert_, slot_, weight_, counts_, capacity_ and l_aux_.
    void route(const float* logits, int64_t S, RunContext& ctx);
    // Jitter on rows [S, C] with the run's kernels (ctx.kernels, where src and
    // dst are): dst = src * factors (the gate's input), or dst += src *
    // factors (its gradient into x); the forward's key_.
    void jitter(const float* src, int64_t S, bool accumulate, float* dst, RunContext& ctx) const;
    // On a device (moe_device.cpp): the gate's logits cross to the host for
    // the gating, the routes' token rows and weights cross back, and the
    // dispatch and combine are the backend's row kernels; x2, dy: [S, C];
    // gin: the gate's input (x2, or x2 jittered).
    Tensor forward_on_device(const Tensor& x2, const Tensor& gin, RunContext& ctx);
    Tensor backward_on_device(const Tensor& dy, RunContext& ctx);
    // Its parts: every expert here (y [S, C] zeroed: the routes' weighted
    // outputs added), the residual MoE's mix (y itself without one), and the
    // experts' backward (dx += the routes' input gradients, dweight per route).
    void forward_local_experts_on_device(const Tensor& x2, const Tensor& y, RunContext& ctx);
    Tensor mix_residual_on_device(const Tensor& x2, const Tensor& y, RunContext& ctx);
    void backward_local_experts_on_device(const Tensor& dmoe, const Tensor& dx, std::vector<float>& dweight,
                                          RunContext& ctx);
    // Expert parallelism (moe_ep.cpp): dispatch this rank's kept routes to
    // the experts' ranks, run the local experts on every rank's tokens,
    // combine the returned outputs into y [S, C] (zeroed); and the mirror
    // (dx [S, C] += the routes' input gradients, dweight per route).
    void forward_experts_ep(const float* x, float* y, RunContext& ctx);
    void backward_experts_ep(const float* dy, float* dx, std::vector<float>& dweight, RunContext& ctx);
    // Every rank's kept routes per expert into ep_counts_ (one allgather over
    // the group's host communicator) and their maximum into ep_rows_.
    void gather_route_counts();
    // The same exchange on a device (moe_ep_device.cpp): the blocks are
    // packed and unpacked by the backend's row kernels in device memory and
    // go over ep_.device; x2, y, dy, dx [S, C] on the device, y zeroed.
    void forward_experts_ep_on_device(const Tensor& x2, const Tensor& y, RunContext& ctx);
    void backward_experts_ep_on_device(const Tensor& dy, const Tensor& dx, std::vector<float>& dweight,
                                       RunContext& ctx);
    // Each local expert on its rows of the received blocks `in` [E * rows, C]:
    // forward (or, `backward`, its backward on their gradients), its result
    // rows scatter-added into `out` (zeroed blocks) at the same rows.
    void run_local_experts_on_device(const Tensor& in, const Tensor& out, bool backward, RunContext& ctx);
    // The returned blocks' rows of the kept routes added into their tokens'
    // rows of dst [S, C] (times the combine weights when `weighted`), the
    // routes of top-k index 0 first: the CPU path's route order.
    void add_returned_rows_on_device(const Tensor& blocks, bool weighted, const Tensor& dst, RunContext& ctx) const;
    // The device rows of local expert l's inputs in the exchanged [E * rows, C]
    // blocks: rows [0, count(q, l)) of block (q, l), q in rank order.
    Tensor local_expert_rows(int64_t l, RunContext& ctx) const;

    MoeConfig cfg_;
    int64_t hidden_ = 0;
    std::unique_ptr<Linear> gate_;
    std::vector<std::unique_ptr<Mlp>> experts_;
    std::unique_ptr<Mlp> mlp_;             // use_residual
    std::unique_ptr<Linear> coefficient_;  // use_residual
    EpGroup ep_;                           // size 1: every expert local
    int64_t first_expert_ = 0;             // global index of experts_[0]

    // Saved by a training forward.
    bool have_forward_ = false;
    Shape shape_;
    bool jittered_ = false;
    dsk_dropout_key key_{};
    std::vector<float> probs_, weight_;
    std::vector<int32_t> expert_, slot_;
    std::vector<Saved> expert_out_;  // [n_e, C] per expert (undefined when it kept no token); ep size 1
    // Expert parallelism: every rank's kept routes per expert [size][E] (one
    // allgather), the exchange's rows per expert (their maximum), and the
    // experts' outputs for this rank's routes [E, rows, C].
    std::vector<int32_t> ep_counts_;
    int64_t ep_rows_ = 0;
    Saved ep_returned_;
    // On a device: the kept routes grouped by their top-k index j (routes
    // [ep_j_start_[j], ep_j_start_[j + 1]), each group in route order): the
    // route (host), its token row and its row expert * rows + slot in the
    // exchanged blocks, and its combine weight (device).
    std::vector<int64_t> ep_j_start_;
    std::vector<size_t> ep_route_;
    Tensor ep_token_, ep_pos_, ep_weight_;
    Saved moe_out_, mlp_out_, coef_;  // use_residual
    // The device path's routes: expert e's kept routes in slot order are
    // [route_start_[e], route_start_[e + 1]) of route_rows_ (int32 token
    // rows) and route_weight_ (combine weights), both on the device; with
    // use_residual, identity rows 0..S-1 and the two mixing coefficients
    // per token (coef_host_ [S, 2], and each column on the device).
    std::vector<int64_t> route_start_;
    Tensor route_rows_, route_weight_;
    Tensor ident_rows_, coef0_, coef1_;
    std::vector<float> coef_host_;
    float l_aux_ = 0.0f;
    float aux_grad_ = 0.0f;
    int64_t capacity_ = 0;
    std::vector<int64_t> counts_;
};

// aux_loss_coef * (sum of the MoE layers' l_aux) of a model's MoE layers.
// `layers` is the list its owner keeps (the GPT root, which a pipeline cut
// leaves holding only its stage's layers), read at every call.
class MoeAux final : public AuxLoss {
public:
    MoeAux(const std::vector<MoeLayer*>* layers, double coef) : layers_(layers), coef_(static_cast<float>(coef)) {}
    float value() const override { return add_terms(0.0f); }
    void set_grad(float dloss) override;
    // v + coef * l_aux of each layer, added in layer order.
    float add_terms(float v) const;

private:
    const std::vector<MoeLayer*>* layers_;
    float coef_;
};

// The model's loss plus aux's terms (its backward sets their gradient first).
std::unique_ptr<Loss> make_moe_aux_loss(std::unique_ptr<Loss> inner, std::shared_ptr<MoeAux> aux);

}  // namespace ds::nn

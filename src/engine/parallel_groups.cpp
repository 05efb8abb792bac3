#include "engine/parallel_groups.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "pipe/topology.h"

namespace ds {

ParallelGroups make_parallel_groups(const std::shared_ptr<comm::Communicator>& world, int stages, int tp, int ep) {
    const int W = world->size();
    DS_CHECK(stages >= 1 && tp >= 1 && ep >= 1 && W % (stages * tp) == 0 && (W / (stages * tp)) % ep == 0,
             DS_ERR_INTERNAL,
             "make_parallel_groups: %d stages x tp %d with expert groups of %d do not lay out %d ranks", stages, tp,
             ep, W);
    ParallelGroups g;
    g.stages = stages;
    g.tp = tp;
    g.ep = ep;
    g.replicas = W / (stages * tp);
    // pipe x data x model with the data axis cut into (expert-data index, expert rank):
    // the same rank numbering as PipeModelDataParallelTopology.
    const pipe::ProcessTopology topo({"pipe", "expert_data", "expert", "model"},
                                     {stages, g.replicas / ep, ep, tp});
    const std::vector<int> c = topo.coord_of(world->rank());
    g.stage = c[0];
    g.ep_rank = c[2];
    g.replica = c[1] * ep + c[2];
    g.tp_rank = c[3];

    if (stages > 1) g.pipe = topo.comm(world, {"pipe"});
    g.data = topo.comm(world, {"expert_data", "expert"});
    g.expert_data = ep > 1 ? topo.comm(world, {"expert_data"}) : g.data;
    if (ep > 1) g.expert = topo.comm(world, {"expert"});
    if (tp > 1) g.model = topo.comm(world, {"model"});
    // The norm's group: one axis reuses that axis' communicator.
    std::vector<std::string> spread;
    if (stages > 1) spread.push_back("pipe");
    if (ep > 1) spread.push_back("expert");
    if (tp > 1) spread.push_back("model");
    if (spread.size() > 1) g.norm = topo.comm(world, spread);
    else if (stages > 1) g.norm = g.pipe;
    else if (ep > 1) g.norm = g.expert;
    else if (tp > 1) g.norm = g.model;
    return g;
}

}  // namespace ds

// ProcessTopology: named axes over the ranks of a world, with DeepSpeed's
// rank <-> coordinate mapping (DEEPSPEED_SEMANTICS.md §8.1): ranks enumerate
// the Cartesian product of the axes' ranges in row-major order, the last axis
// varying fastest: rank = sum_i coord_i * prod_{j>i} dims_j. Named
// constructors give DeepSpeed's pipeline layouts (pipe outermost, tensor
// slices adjacent). The communicator of a group of axes is a split of the
// world (comm/communicator.h): same coordinates on the other axes, same color.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"

namespace ds::pipe {

class ProcessTopology {
public:
    // Axis names must be non-empty and distinct; dims >= 1; the product (the
    // world size) at most 2^31 - 1. Throws DS_ERR_INVALID_ARGUMENT naming what is wrong.
    ProcessTopology(std::vector<std::string> axes, std::vector<int> dims);

    // PipeDataParallelTopology(num_pp, num_dp): axes pipe, data.
    static ProcessTopology pipe_data(int num_pp, int num_dp);
    // PipeModelDataParallelTopology(num_pp, num_mp, num_dp): axes pipe, data,
    // model with dims [pp, dp, mp] (note the argument order, as DeepSpeed's).
    static ProcessTopology pipe_model_data(int num_pp, int num_mp, int num_dp);
    // PipelineParallelGrid's default without a topology: the world size's
    // prime factors in ascending order, dealt alternately to pipe and data.
    static ProcessTopology default_grid(int world_size);

    const std::vector<std::string>& axes() const { return axes_; }
    const std::vector<int>& dims() const { return dims_; }
    int world_size() const { return world_; }
    // The position of `axis` in axes(), or -1.
    int axis_index(const std::string& axis) const;
    // get_dim: the axis' size, 0 when the topology has no such axis.
    int dim(const std::string& axis) const;

    // get_rank: coordinates in axis order (one per axis, each in range).
    int rank_of(const std::vector<int>& coord) const;
    // get_rank(**coords): every axis named exactly once.
    int rank_of(const std::vector<std::pair<std::string, int>>& named) const;
    // get_coord: the coordinates of `rank`, in axis order.
    std::vector<int> coord_of(int rank) const;

    // get_axis_comm_lists: one list per combination of the other axes
    // (row-major), each the ranks varying along `axis` in increasing
    // coordinate. Empty when the topology has no such axis (as DeepSpeed's).
    std::vector<std::vector<int>> axis_comm_lists(const std::string& axis) const;
    // filter_match: the ranks (increasing) whose coordinates equal every
    // criterion; an unknown axis throws.
    std::vector<int> filter_match(const std::vector<std::pair<std::string, int>>& criteria) const;
    // get_axis_list: the ranks (increasing) whose coordinate on `axis` is idx.
    std::vector<int> axis_list(const std::string& axis, int idx) const;
    // get_rank_repr: "<axis><inner><coord:02d>" for every axis not omitted,
    // joined by `outer` (DeepSpeed omits data and pipe by default).
    std::string rank_repr(int rank, const std::vector<std::string>& omit = {"data", "pipe"},
                          const std::string& inner = "_", const std::string& outer = "-") const;

    // The group of `rank` that varies along `varying` (axis names, each once)
    // and agrees on every other axis: its index among all such groups
    // (row-major over the other axes) is the split color. For one axis this
    // is the index of rank's list in axis_comm_lists(axis).
    int group_index(int rank, const std::vector<std::string>& varying) const;
    // The members of that group, increasing (= their order in the group).
    std::vector<int> group_members(int rank, const std::vector<std::string>& varying) const;

    // This rank's communicator over the group varying along `varying`: a
    // split of `world` (collective over it: every rank must call it with the
    // same axes). world->size() must equal world_size(); the new
    // communicator's rank order is the world rank order (= increasing
    // coordinate for a single axis).
    std::shared_ptr<comm::Communicator> comm(const std::shared_ptr<comm::Communicator>& world,
                                             const std::vector<std::string>& varying) const;

    // "axes pipe=2, data=2".
    std::string describe() const;

private:
    void check_rank(int rank, const char* what) const;
    // Marks the axes named in `varying` (throws on unknown or repeated names).
    std::vector<bool> varying_mask(const std::vector<std::string>& varying) const;

    std::vector<std::string> axes_;
    std::vector<int> dims_;
    std::vector<int> strides_;  // stride of axis i = product of dims after i
    int world_ = 1;
};

}  // namespace ds::pipe

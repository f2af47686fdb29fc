// SPDX-License-Identifier: Apache-2.0
// Placement of one plan across the devices of a heterogeneous platform, and the split of the
// placed plan into one plan per device. Three passes (see passes.cpp for where they run):
//
//   place_devices     a device for every node: pins first (Node::on, DeviceScope), then the
//                     capability query (a node goes only where a kernel takes it), then list
//                     scheduling: HEFT over the cost model (DeviceCosts per device, per-op
//                     times measured by earlier runs where the platform has them), compared
//                     with each device alone. Sources follow their readers: a variable lives
//                     where its update runs, an input where it is read, constants are copied
//                     to every device that reads them.
//   insert_transfers  every value read on another device than its own gets one send (on its
//                     device) and one recv per reading device: explicit plan nodes (op
//                     transfer), so a value crosses to a device once however many nodes read
//                     it there. The plan is then ordered by the schedule's start times, which
//                     is the order each device's part runs in.
//   split_devices     one self-contained plan per device (Plan::parts): its nodes, its sends
//                     and recvs, copies of the constants it reads; each part gets its own
//                     assign elision, commit point (the CPU part a commit gate that waits for
//                     the other devices) and memory plan, in the reuse mode of its device.
//
// The runtime side (pinned staging buffers, OpenCL user events and event callbacks, the run
// protocol across devices) is src/hetero/.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/plan.hpp"

namespace hetgraph::detail {

/// One device as placement sees it.
struct DeviceModel {
  Device id;
  std::string name;  // "cpu", "opencl:0:1 (pthread-...)"
  DeviceCosts costs;
  const Capabilities* caps = nullptr;
  bool host = false;  // the CPU (values to and from it need no device transfer)
};

/// A measured time of node `n` on device `d` in microseconds (the profiler's table), if any.
using MeasuredCost =
    std::function<std::optional<double>(std::size_t d, const Plan& p, const PlanNode& n)>;

struct PlacementRequest {
  std::vector<DeviceModel> devices;
  HeteroOptions::Placement mode = HeteroOptions::Placement::automatic;
  double min_split_gain = 0.1;
  MeasuredCost measured;  // may be empty
  /// False when the costs are placeholders (nothing was left to decide: every node with work
  /// pinned, or the "first" placement without figures): the report then gives no estimates.
  bool estimates = true;
};

/// What engine_report tells of the placement.
struct PlacementSummary {
  std::vector<std::string> device_names;
  double estimated_us = 0, split_us = 0;
  std::vector<std::pair<std::string, double>> single_device_us;
  std::string decision;
  std::size_t transfers = 0, transfer_bytes = 0;
};

void place_devices(Plan& p, const PlacementRequest& r);
void insert_transfers(Plan& p, const Placer& placer);
/// `reuse`: ReuseMode::none when the memory planner is off for every part.
/// `parallel_ops`: each part whose device gives a kernel several threads gets
/// fuse_parallel_ops too.
void split_devices(Plan& p, const Placer& placer, ReuseMode reuse, bool parallel_ops = false);

/// The model's time of node `n` on a device with costs `c`, in microseconds.
double node_cost_us(const Plan& p, const PlanNode& n, const DeviceCosts& c);
/// The model's time of `bytes` crossing from device `from` to device `to` (through host
/// memory), in microseconds; 0 when they are the same.
double transfer_cost_us(std::size_t bytes, std::size_t from, std::size_t to,
                        const std::vector<DeviceModel>& devices);
/// What identifies a node's work for the cost table: op, attributes, input and output shapes.
std::string cost_signature(const Plan& p, const PlanNode& n);

}  // namespace hetgraph::detail

#include "client/stall_diagnosis.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zephon::client {

std::string DescribeStall(const proto::InstanceStatus& instance, uint32_t own_reader_index) {
  const uint64_t slots = instance.ring_slots();
  std::vector<std::string> holders;
  const proto::ReaderStatus* slowest = nullptr;
  for (const proto::ReaderStatus& r : instance.readers()) {
    if (r.reader_index() == own_reader_index) continue;
    // Only these states gate the producer (ring_writer.cc): a detached or dead reader
    // no longer holds slots.
    if (r.state() != "attached" && r.state() != "reserved") continue;
    if (slowest == nullptr || r.lag() > slowest->lag()) slowest = &r;
    if (slots == 0 || r.lag() < slots) continue;
    if (r.state() == "reserved") {
      holders.push_back(absl::StrCat("reader slot ", r.reader_index(),
                                     ", reserved for a DP-group peer that has not attached"));
    } else {
      holders.push_back(absl::StrCat("global_rank ", r.global_rank(), " (pid ", r.pid(),
                                     ", reader ", r.reader_index(), ") has not released ",
                                     r.lag(), " batches"));
    }
  }
  if (!holders.empty()) {
    return absl::StrCat(
        "the ring of instance ", instance.instance_id(), " is full (", slots,
        " slots) and held by its slowest reader: ", absl::StrJoin(holders, "; "),
        ". That rank is stopped, hung or no longer iterating, and its DP-group peers wait "
        "for it; look at that rank (its own error or stack), not at this one");
  }
  std::string slowest_text;
  if (slowest != nullptr) {
    slowest_text = absl::StrCat(" (slowest peer: global_rank ", slowest->global_rank(),
                                ", lag ", slowest->lag(), " of ", slots, " slots)");
  }
  return absl::StrCat("no DP-group peer holds the ring of instance ", instance.instance_id(),
                      slowest_text, ": zephond has not produced the next batch (",
                      instance.produced(), " produced so far); see `zephonctl status` and the "
                      "daemon log");
}

}  // namespace zephon::client

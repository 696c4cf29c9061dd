// LeaderReporter: the seam between a daemon's local round (LocalRounds) and its run's
// leader. zephond's implementation is CheckpointRouter (in-process aggregator when this
// daemon leads, else the peer service of the leader); tests implement it with a fake.
//
// Thread-safety: implementations are thread-safe; Submit blocks the calling thread.
#ifndef ZEPHON_DAEMON_CHECKPOINT_LEADER_REPORTER_H_
#define ZEPHON_DAEMON_CHECKPOINT_LEADER_REPORTER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/checkpoint.pb.h"

namespace zephon::checkpoint {

// How the leader of a run is found: the rank options that name it.
struct LeaderRoute {
  std::string run_id;          // empty only for an unnamed single-rank run
  std::string aggregate_dir;   // holds the rendezvous file <run_id>/leader
  std::string leader_address;  // explicit host:port; empty = read the rendezvous file
  uint32_t global_rank = 0;    // a rank of the reporting daemon, for log lines
};

class LeaderReporter {
 public:
  virtual ~LeaderReporter() = default;

  // Delivers the daemon's pre-merged `report` to the run's leader and returns the
  // leader's answer (the merged checkpoint, or the round's error). `leads`: this daemon
  // hosts global_rank 0 of the run. Returns by `deadline`.
  virtual absl::StatusOr<proto::CheckpointResult> Submit(const proto::CheckpointReport& report,
                                                         const LeaderRoute& route, bool leads,
                                                         absl::Time deadline) const = 0;
};

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_LEADER_REPORTER_H_

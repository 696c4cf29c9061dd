// LedRun: what a leader knows of a run whose global_rank 0 is attached to it, as its own
// ranks attached it. The peer service holds every remote report against it, so nothing
// a report claims (where to write, how large the world is) is taken from the wire.
#ifndef ZEPHON_DAEMON_CHECKPOINT_LED_RUN_H_
#define ZEPHON_DAEMON_CHECKPOINT_LED_RUN_H_

#include <cstdint>
#include <string>

namespace zephon::checkpoint {

struct LedRun {
  uint32_t world_size = 0;
  uint32_t canonical_replicas = 0;
  std::string spec_hash;
  std::string aggregate_dir;
};

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_LED_RUN_H_

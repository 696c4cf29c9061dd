// MidWindowWarning: whether a merged checkpoint was taken mid-window, and what to tell
// the user (upstream Zephon's mid-window checkpoint warning).
//
// A lane round is one batch from each of the C lanes. The elastic guarantee (each step
// holds the same set of batches under any dp_degree dividing C) needs every step, and
// hence every checkpoint, to fall on a whole number of lane rounds: all lanes at the
// same next_batch_index. A checkpoint whose lanes stand at unequal counts still restores
// exactly (no batch lost or repeated), but on another dp_degree the steps after it hold
// other batch sets than the saving topology's would have.
//
// Thread-safety: a pure function.
#ifndef ZEPHON_DAEMON_CHECKPOINT_MID_WINDOW_H_
#define ZEPHON_DAEMON_CHECKPOINT_MID_WINDOW_H_

#include <optional>
#include <string>

#include "proto/checkpoint.pb.h"

namespace zephon::checkpoint {

// nullopt when every lane of `state` stands at the same next_batch_index (or it has no
// lanes); else the warning, naming the round, run, global batch count (the "step"),
// the lanes' range and C.
std::optional<std::string> MidWindowWarning(const proto::CheckpointState& state);

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_MID_WINDOW_H_

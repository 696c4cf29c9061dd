// The AttachProgress message a waiting client receives (zephon.proto): the node's text
// conversions and object-store downloads since its attach began, as counters the
// client's deadline watches and one line for people.
//
// Thread-safety: a pure function.
#ifndef ZEPHON_DAEMON_ATTACH_PROGRESS_H_
#define ZEPHON_DAEMON_ATTACH_PROGRESS_H_

#include <cstdint>

#include "absl/time/time.h"
#include "daemon/pipeline/formats/conversion_progress.h"
#include "proto/zephon.pb.h"

namespace zephon::daemon {

// How often zephond sends AttachProgress while an attach is in progress.
inline constexpr absl::Duration kAttachProgressInterval = absl::Seconds(1);

// The node's work an attach may wait on: text conversions, and the bytes the shard cache
// downloaded from object stores (0 without one).
struct AttachWork {
  pipeline::ConversionProgress::Snapshot conversions;
  uint64_t downloaded_bytes = 0;
};

// `start` is the counters when the attach arrived, `now` the current ones.
proto::AttachProgress DescribeAttachProgress(const AttachWork& start, const AttachWork& now,
                                             absl::Duration elapsed);

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_ATTACH_PROGRESS_H_

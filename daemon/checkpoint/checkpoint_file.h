// The merged checkpoint's byte format (on disk and on the wire) and the file primitives
// used to store it.
//
// Layout, all integers little-endian:
//   offset  0  char[8]  magic "ZEPHCKPT"
//   offset  8  u32      format_version (kCheckpointFormatVersion)
//   offset 12  u32      header_bytes (32)
//   offset 16  u64      payload_bytes
//   offset 24  u32      crc32 (zlib) of the payload
//   offset 28  u32      reserved, 0
//   offset 32  payload: proto::CheckpointState, deterministically serialized
// The payload repeats format_version; both must be known to this build. A format change
// that old builds must refuse bumps kCheckpointFormatVersion.
//
// Thread-safety: every function is thread-safe (no shared state). WriteFileAtomically
// to the same path from several threads is safe; the last rename wins.
#ifndef ZEPHON_DAEMON_CHECKPOINT_CHECKPOINT_FILE_H_
#define ZEPHON_DAEMON_CHECKPOINT_CHECKPOINT_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/atomic_file.h"
#include "proto/checkpoint.pb.h"

namespace zephon::checkpoint {

inline constexpr uint32_t kCheckpointFormatVersion = 1;
inline constexpr size_t kCheckpointHeaderBytes = 32;
inline constexpr std::string_view kCheckpointMagic = "ZEPHCKPT";

// Header + deterministic serialization of `state`. Equal states give equal bytes.
// `state.format_version` is written as given (callers set kCheckpointFormatVersion).
std::string EncodeCheckpoint(const proto::CheckpointState& state);

// Parses and verifies bytes produced by EncodeCheckpoint. Errors:
//   INVALID_ARGUMENT    "not a Zephon checkpoint" (wrong magic: another file);
//   FAILED_PRECONDITION "checkpoint format version N is newer than this zephond (M)"
//                       (header or payload; upgrade zephond to read it);
//   DATA_LOSS           truncated header or payload, trailing bytes, CRC mismatch,
//                       malformed header or payload (the file is damaged: use another).
// A spec written when mapping_strategy, lane_routing and exhausted_policy were strings
// comes back with them as enums (pipeline::UpgradeStringOptions).
absl::StatusOr<proto::CheckpointState> DecodeCheckpoint(std::string_view bytes);

// Checkpoint and rendezvous files are written with the shared atomic writer.
using ::zephon::WriteFileAtomically;

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_CHECKPOINT_FILE_H_

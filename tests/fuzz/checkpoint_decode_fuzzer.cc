// Fuzz target: the merged-checkpoint decoder (daemon/checkpoint/checkpoint_file.cc),
// which parses files and wire messages another node or user controls.
//
// Each input is decoded twice: as given (magic, header, length and CRC checks), and with
// its payload_bytes and CRC-32 fields repaired, so mutations reach the protobuf parse and
// the version checks behind the checksum. Invariants beyond "no crash, no UB":
//   * an error is one of the documented codes (INVALID_ARGUMENT, FAILED_PRECONDITION,
//     DATA_LOSS) with a non-empty message;
//   * a decoded state re-encodes to bytes that decode to an equal state, and re-encoding
//     that state gives the same bytes again (EncodeCheckpoint is canonical);
//   * a decoded state never claims a format version newer than this build.
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using zephon::checkpoint::DecodeCheckpoint;
using zephon::checkpoint::EncodeCheckpoint;
using zephon::checkpoint::kCheckpointFormatVersion;
using zephon::checkpoint::kCheckpointHeaderBytes;

void CheckDecode(std::string_view bytes) {
  absl::StatusOr<zephon::proto::CheckpointState> state = DecodeCheckpoint(bytes);
  if (!state.ok()) {
    const absl::StatusCode code = state.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument ||
                   code == absl::StatusCode::kFailedPrecondition ||
                   code == absl::StatusCode::kDataLoss,
               state.status().ToString());
    FUZZ_CHECK(!state.status().message().empty(), "empty error message");
    return;
  }
  FUZZ_CHECK(state->format_version() <= kCheckpointFormatVersion,
             state->ShortDebugString());
  const std::string encoded = EncodeCheckpoint(*state);
  absl::StatusOr<zephon::proto::CheckpointState> again = DecodeCheckpoint(encoded);
  FUZZ_CHECK(again.ok(), again.status().ToString());
  const std::string reencoded = EncodeCheckpoint(*again);
  FUZZ_CHECK(reencoded == encoded, "re-encoding a decoded checkpoint changed its bytes");
}

// `bytes` with the payload length and CRC-32 header fields set to match its payload.
std::string RepairLengthAndCrc(std::string_view bytes) {
  std::string out(bytes);
  const std::string_view payload = bytes.substr(kCheckpointHeaderBytes);
  const uint64_t length = payload.size();
  const uint32_t crc = static_cast<uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(payload.data()),
              payload.size()));
  for (int i = 0; i < 8; ++i) out[16 + i] = static_cast<char>(length >> (8 * i));
  for (int i = 0; i < 4; ++i) out[24 + i] = static_cast<char>(crc >> (8 * i));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CheckDecode(bytes);
  if (size >= kCheckpointHeaderBytes) CheckDecode(RepairLengthAndCrc(bytes));
  return 0;
}

#include "daemon/checkpoint/checkpoint_file.h"

#include <zlib.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/little_endian.h"
#include "daemon/pipeline/spec_string_form.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace zephon::checkpoint {
namespace {

// Field offsets of the header (see checkpoint_file.h).
constexpr size_t kVersionOffset = 8;
constexpr size_t kHeaderBytesOffset = 12;
constexpr size_t kPayloadBytesOffset = 16;
constexpr size_t kCrcOffset = 24;
constexpr size_t kReservedOffset = 28;

uint32_t Crc32(std::string_view bytes) {
  return static_cast<uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()),
              bytes.size()));
}

void PutU32(std::string* out, size_t offset, uint32_t v) {
  StoreLittleEndian(out->data() + offset, v, 4);
}
void PutU64(std::string* out, size_t offset, uint64_t v) {
  StoreLittleEndian(out->data() + offset, v, 8);
}
uint32_t GetU32(std::string_view in, size_t offset) {
  return static_cast<uint32_t>(LoadLittleEndian(in.data() + offset, 4));
}
uint64_t GetU64(std::string_view in, size_t offset) {
  return LoadLittleEndian(in.data() + offset, 8);
}

absl::Status NewerVersionError(uint32_t version) {
  return absl::FailedPreconditionError(
      absl::StrCat("checkpoint format version ", version, " is newer than this zephond (",
                   kCheckpointFormatVersion, "): upgrade zephond to restore it"));
}

}  // namespace

std::string EncodeCheckpoint(const proto::CheckpointState& state) {
  std::string payload;
  {
    google::protobuf::io::StringOutputStream stream(&payload);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    state.SerializeToCodedStream(&coded);
  }
  std::string out(kCheckpointHeaderBytes, '\0');
  std::memcpy(out.data(), kCheckpointMagic.data(), kCheckpointMagic.size());
  PutU32(&out, kVersionOffset, state.format_version());
  PutU32(&out, kHeaderBytesOffset, kCheckpointHeaderBytes);
  PutU64(&out, kPayloadBytesOffset, payload.size());
  PutU32(&out, kCrcOffset, Crc32(payload));
  PutU32(&out, kReservedOffset, 0);
  out += payload;
  return out;
}

absl::StatusOr<proto::CheckpointState> DecodeCheckpoint(std::string_view bytes) {
  const size_t magic_len = std::min(bytes.size(), kCheckpointMagic.size());
  if (bytes.empty() || bytes.substr(0, magic_len) != kCheckpointMagic.substr(0, magic_len)) {
    return absl::InvalidArgumentError(
        "not a Zephon checkpoint (the file does not start with \"ZEPHCKPT\")");
  }
  if (bytes.size() < kCheckpointHeaderBytes) {
    return absl::DataLossError(absl::StrCat("checkpoint truncated: ", bytes.size(),
                                            " bytes, shorter than the ",
                                            kCheckpointHeaderBytes, "-byte header"));
  }
  const uint32_t version = GetU32(bytes, kVersionOffset);
  if (version > kCheckpointFormatVersion) return NewerVersionError(version);
  if (version == 0) return absl::DataLossError("checkpoint header corrupt: format version 0");
  const uint32_t header_bytes = GetU32(bytes, kHeaderBytesOffset);
  if (header_bytes != kCheckpointHeaderBytes || GetU32(bytes, kReservedOffset) != 0) {
    return absl::DataLossError(absl::StrCat("checkpoint header corrupt: header_bytes ",
                                            header_bytes, ", reserved ",
                                            GetU32(bytes, kReservedOffset)));
  }
  const uint64_t payload_bytes = GetU64(bytes, kPayloadBytesOffset);
  const uint64_t have = bytes.size() - kCheckpointHeaderBytes;
  if (have < payload_bytes) {
    return absl::DataLossError(absl::StrCat("checkpoint truncated: header announces ",
                                            payload_bytes, " payload bytes, file has ",
                                            have));
  }
  if (have > payload_bytes) {
    return absl::DataLossError(absl::StrCat("checkpoint corrupt: ", have - payload_bytes,
                                            " unexpected bytes after the ", payload_bytes,
                                            "-byte payload"));
  }
  const std::string_view payload = bytes.substr(kCheckpointHeaderBytes);
  const uint32_t want_crc = GetU32(bytes, kCrcOffset);
  const uint32_t got_crc = Crc32(payload);
  if (want_crc != got_crc) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint corrupt: payload checksum mismatch (header crc32 ", absl::Hex(want_crc),
        ", payload crc32 ", absl::Hex(got_crc), ")"));
  }
  proto::CheckpointState state;
  if (!state.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError("checkpoint corrupt: payload is not a CheckpointState");
  }
  if (state.format_version() > kCheckpointFormatVersion) {
    return NewerVersionError(state.format_version());
  }
  if (state.format_version() != version) {
    return absl::DataLossError(
        absl::StrCat("checkpoint corrupt: header says format version ", version,
                     " but the payload says ", state.format_version()));
  }
  // Checkpoints written while the spec's options were strings keep those strings.
  if (state.has_spec()) {
    if (absl::Status s = pipeline::UpgradeStringOptions(state.mutable_spec()); !s.ok()) {
      return absl::DataLossError(absl::StrCat("checkpoint corrupt: ", s.message()));
    }
  }
  return state;
}

}  // namespace zephon::checkpoint

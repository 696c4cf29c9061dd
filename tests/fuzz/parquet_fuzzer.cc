// Fuzz target: the Parquet decoder room (daemon/pipeline/formats/parquet/), which reads
// user-supplied Parquet files: the Thrift compact decoder of footers and page headers,
// the page decoders, and whole files through OpenParquetRecords.
//
// Input: a mode byte, then the bytes. Mode % 4:
//   0  Thrift: the bytes as a FileMetaData, a PageHeader and an OffsetIndex;
//   1  a whole file, column "text" read as text;
//   2  a whole file, column "ids" read as token lists;
//   3  page decoders: RLE/bit-packed hybrid (bit width from the next byte),
//      DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY on the rest;
//      the LZ4 codec (Hadoop framing, else a raw block) on the rest, into a buffer of
//      exactly the page size it is given (the first frame's claimed size, capped).
// Invariants beyond "no crash, no UB, no out-of-bounds read": every error has a
// message; a file source returns exactly NumRecords() records when it does not fail,
// and never more; a text record's view and a token list lie within what Next returned.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "daemon/pipeline/formats/parquet/codecs.h"
#include "daemon/pipeline/formats/parquet/encodings.h"
#include "daemon/pipeline/formats/parquet/metadata.h"
#include "daemon/pipeline/formats/parquet/parquet_records.h"
#include "daemon/pipeline/formats/shard_file.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace pq = zephon::pipeline::parquet;
using zephon::pipeline::RecordField;
using zephon::pipeline::RecordSource;

void CheckError(const absl::Status& s) {
  FUZZ_CHECK(s.ok() || !s.message().empty(), s.ToString());
}

void Records(std::string_view bytes, RecordField field) {
  auto source = zephon::pipeline::OpenParquetRecords(
      zephon::pipeline::MemoryShardFile("fuzz.parquet", std::string(bytes)), field);
  if (!source.ok()) return CheckError(source.status());
  const uint64_t expected = *(*source)->NumRecords();
  uint64_t n = 0;
  RecordSource::Value v;
  uint64_t sink = 0;
  while (true) {
    absl::StatusOr<bool> more = (*source)->Next(&v);
    if (!more.ok()) return CheckError(more.status());
    if (!*more) break;
    ++n;
    FUZZ_CHECK(n <= expected, "more records than NumRecords()");
    for (char c : v.text) sink += static_cast<unsigned char>(c);  // touch every byte (ASan)
    for (int32_t t : v.tokens) sink += static_cast<uint32_t>(t);
    (void)(*source)->Where();
  }
  FUZZ_CHECK(n == expected, "fewer records than NumRecords() without an error");
  (void)sink;
  CheckError(zephon::pipeline::ParquetFooterChecksum(
                 *zephon::pipeline::MemoryShardFile("fuzz.parquet", std::string(bytes)))
                 .status());
}

// The page size is the first Hadoop frame's claimed decompressed size, so a consistent
// frame is one mutation away; the buffer is allocated at exactly that size, so ASan
// sees any write past the page.
void Lz4(std::string_view bytes) {
  size_t expected = bytes.size();
  if (bytes.size() >= 4) {
    const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
    expected = (size_t{b[0]} << 24) | (size_t{b[1]} << 16) | (size_t{b[2]} << 8) | b[3];
  }
  expected = std::min<size_t>(expected, 1 << 20);
  std::unique_ptr<char[]> out(new char[std::max<size_t>(expected, 1)]);
  CheckError(pq::Decompress(pq::Codec::kLz4, bytes, expected, out.get()));
}

void Decoders(std::string_view bytes) {
  if (bytes.empty()) return;
  const int width = static_cast<uint8_t>(bytes[0]) % 34;  // 33: an invalid width
  bytes.remove_prefix(1);
  std::vector<uint32_t> levels(1000);
  CheckError(pq::DecodeRleHybrid(bytes, width, levels.size(), levels.data()));
  pq::PodVector<int64_t> ints;
  size_t consumed = 0;
  const absl::Status s = pq::DecodeDeltaBinaryPacked(bytes, 8, 5000, &ints, &consumed);
  CheckError(s);
  if (s.ok()) FUZZ_CHECK(consumed <= bytes.size(), "DELTA_BINARY_PACKED consumed past the input");
  ints.clear();
  CheckError(pq::DecodeDeltaBinaryPacked(bytes, 4, 5000, &ints, &consumed));
  std::vector<std::string_view> strings;
  CheckError(pq::DecodeDeltaLengthByteArray(bytes, 100, &strings));
  strings.clear();
  std::string arena;
  CheckError(pq::DecodeDeltaByteArray(bytes, 100, &arena, &strings));
  strings.clear();
  CheckError(pq::DecodePlainByteArray(bytes, 100, &strings));
  Lz4(bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % 4;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (mode) {
    case 0:
      CheckError(pq::ParseFileMetaData(bytes).status());
      CheckError(pq::ParsePageHeader(bytes).status());
      CheckError(pq::ParseOffsetIndex(bytes).status());
      break;
    case 1:
      Records(bytes, RecordField{RecordField::Kind::kText, "text"});
      break;
    case 2:
      Records(bytes, RecordField{RecordField::Kind::kTokens, "ids"});
      break;
    default:
      Decoders(bytes);
      break;
  }
  return 0;
}

// Fuzz target: the MDS shard decoder (daemon/pipeline/formats/mds): decompression, the
// sample table and the column decodings, which read user-supplied MDS shards.
//
// Input: [mode][shard bytes]. mode & 7 picks the compression (0 none, 1 zstd, 2 gz,
// 3 bz2, 4 br, 5 snappy; 6, 7 none); with a compression two u32 follow mode: the raw
// size (capped at 1 MiB) and the sample count the index claims. (mode >> 3) % 3 picks the column read:
// "any" (ndarray, tokens), "ids" (ndarray:uint16, tokens) or "text" (str, text). The
// columns are those of daemon/pipeline/formats/mds/testdata (any, ids, n: int, text) and
// uncompressed, the index's sample count is the shard's own first u32, so inputs get
// past the header.
// Invariants beyond "no crash, no UB, no out-of-bounds read":
//   * every error is DATA_LOSS or INVALID_ARGUMENT and names the shard;
//   * on success Next() yields exactly NumRecords() records of the kind asked for,
//     tokens are in [0, 2^31), and Where() names the shard and the sample.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/pipeline/formats/mds/mds_index.h"
#include "daemon/pipeline/formats/mds/mds_records.h"
#include "daemon/pipeline/formats/shard_file.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using zephon::pipeline::MemoryShardFile;
using zephon::pipeline::RecordField;
using zephon::pipeline::RecordSource;
namespace mds = zephon::pipeline::mds;

const mds::MdsShardInfo& Template() {
  static const mds::MdsShardInfo* shard = [] {
    const char* json = R"({"version": 2, "shards": [{"format": "mds", "version": 2,
      "samples": 0, "column_names": ["any", "ids", "n", "text"],
      "column_encodings": ["ndarray", "ndarray:uint16", "int", "str"],
      "column_sizes": [null, null, 8, null], "compression": null, "hashes": [],
      "size_limit": null, "raw_data": {"basename": "shard.00000.mds", "bytes": 0,
      "hashes": {}}, "zip_data": null}]})";
    auto index = mds::ParseMdsIndex("index.json", json);
    FUZZ_CHECK(index.ok(), index.status().ToString());
    return new mds::MdsShardInfo(index->shards[0]);
  }();
  return *shard;
}

uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian hosts only, as the daemon
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  ++data;
  --size;
  mds::MdsShardInfo shard = Template();
  static constexpr mds::MdsCompression kCompressions[] = {
      mds::MdsCompression::kNone,   mds::MdsCompression::kZstd,
      mds::MdsCompression::kGzip,   mds::MdsCompression::kBzip2,
      mds::MdsCompression::kBrotli, mds::MdsCompression::kSnappy,
      mds::MdsCompression::kNone,   mds::MdsCompression::kNone};
  shard.compression = kCompressions[mode & 7];
  if (shard.compression != mds::MdsCompression::kNone) {
    if (size < 8) return 0;
    shard.raw_data.bytes = LoadU32(data) % (1u << 20);
    shard.samples = LoadU32(data + 4);
    data += 8;
    size -= 8;
    shard.zip_data = mds::MdsFileInfo{"shard.00000.mds.x", size, {}};
  } else {
    shard.raw_data.bytes = size;
    shard.samples = size >= 4 ? LoadU32(data) : 0;
  }
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const std::string name = shard.stored().basename;

  RecordField field;
  field.name = (mode >> 3) % 3 == 0 ? "any" : (mode >> 3) % 3 == 1 ? "ids" : "text";
  field.kind = field.name == "text" ? RecordField::Kind::kText : RecordField::Kind::kTokens;
  auto check_error = [&](const absl::Status& s) {
    FUZZ_CHECK(s.code() == absl::StatusCode::kDataLoss ||
                   s.code() == absl::StatusCode::kInvalidArgument,
               s.ToString());
    FUZZ_CHECK(absl::StrContains(s.message(), name), s.ToString());
  };
  auto source = mds::OpenMdsRecords(shard, MemoryShardFile(name, bytes), field);
  if (!source.ok()) {
    check_error(source.status());
    return 0;
  }
  RecordSource::Value value;
  uint64_t n = 0;
  for (;;) {
    absl::StatusOr<bool> more = (*source)->Next(&value);
    if (!more.ok()) {
      check_error(more.status());
      return 0;
    }
    if (!*more) break;
    FUZZ_CHECK((*source)->Where() == absl::StrCat(name, ": sample ", n), (*source)->Where());
    ++n;
    if (field.kind == RecordField::Kind::kText) {
      FUZZ_CHECK(value.kind == RecordSource::Value::Kind::kText, "kind");
    } else {
      FUZZ_CHECK(value.kind == RecordSource::Value::Kind::kTokens, "kind");
      for (const int32_t t : value.tokens) FUZZ_CHECK(t >= 0, absl::StrCat(t));
    }
  }
  FUZZ_CHECK(n == *(*source)->NumRecords(), absl::StrCat(n));
  return 0;
}

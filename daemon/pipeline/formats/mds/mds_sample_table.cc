#include "daemon/pipeline/formats/mds/mds_sample_table.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace zephon::pipeline::mds {
namespace {

uint32_t LoadU32(const char* p) {
  return static_cast<uint32_t>(static_cast<uint8_t>(p[0])) |
         static_cast<uint32_t>(static_cast<uint8_t>(p[1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(p[2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(p[3])) << 24;
}

}  // namespace

uint32_t MdsSampleTable::Offset(uint64_t i) const {
  return LoadU32(bytes_.data() + 4 + 4 * i);
}

absl::StatusOr<MdsSampleTable> MdsSampleTable::Parse(
    std::string name, absl::string_view bytes, uint64_t expected_samples,
    std::vector<std::optional<uint64_t>> column_sizes) {
  auto bad = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("MDS shard ", name, ": ", what,
                                            " (the shard is corrupt or truncated)"));
  };
  if (bytes.size() < 4) {
    return bad(absl::StrCat("has ", bytes.size(), " bytes, too few for its sample count"));
  }
  const uint64_t n = LoadU32(bytes.data());
  if (n != expected_samples) {
    return bad(absl::StrCat("holds ", n, " samples but the index says ", expected_samples));
  }
  const uint64_t table_end = 4 + 4 * (n + 1);
  if (table_end > bytes.size()) {
    return bad(absl::StrCat("its ", n + 1, " sample offsets end at byte ", table_end,
                            ", past the shard's ", bytes.size(), " bytes"));
  }
  auto offset = [&](uint64_t i) { return LoadU32(bytes.data() + 4 + 4 * i); };
  uint64_t previous = offset(0);
  if (previous < table_end) {
    return bad(absl::StrCat("sample 0 starts at byte ", previous,
                            ", inside the offsets table (which ends at ", table_end, ")"));
  }
  for (uint64_t i = 1; i <= n; ++i) {
    const uint64_t end = offset(i);
    if (end < previous) {
      return bad(absl::StrCat("sample ", i - 1, " ends at byte ", end,
                              ", before it starts (", previous, "): offsets not increasing"));
    }
    previous = end;
  }
  if (previous > bytes.size()) {
    return bad(absl::StrCat("its last sample ends at byte ", previous, ", past the shard's ",
                            bytes.size(), " bytes"));
  }
  return MdsSampleTable(std::move(name), bytes, n, std::move(column_sizes));
}

absl::StatusOr<absl::string_view> MdsSampleTable::Column(uint64_t sample, size_t column) const {
  const absl::string_view data =
      bytes_.substr(Offset(sample), Offset(sample + 1) - Offset(sample));  // checked in Parse
  auto bad = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("MDS shard ", name_, ": sample ", sample, ": ",
                                            what, " (the shard is corrupt)"));
  };
  size_t variable = 0;
  for (const auto& size : column_sizes_) variable += size ? 0 : 1;
  if (4 * variable > data.size()) {
    return bad(absl::StrCat("its sizes header (", variable, " x 4 bytes) runs past the sample's ",
                            data.size(), " bytes"));
  }
  uint64_t pos = 4 * variable;
  uint64_t begin = 0;
  uint64_t length = 0;
  size_t v = 0;
  for (size_t c = 0; c < column_sizes_.size(); ++c) {
    const uint64_t size = column_sizes_[c] ? *column_sizes_[c] : LoadU32(data.data() + 4 * v++);
    if (c == column) {
      begin = pos;
      length = size;
    }
    pos += size;  // each term < 2^33 and at most a few thousand columns: no overflow
  }
  if (pos != data.size()) {
    return bad(absl::StrCat("its columns' sizes add up to ", pos, " bytes but the sample has ",
                            data.size()));
  }
  return data.substr(begin, length);
}

}  // namespace zephon::pipeline::mds

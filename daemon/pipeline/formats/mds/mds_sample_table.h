// MdsSampleTable: the samples of one MDS shard's raw bytes, as Streaming's MDSWriter
// lays a shard out (mds/writer.py encode_joint_shard, encode_sample):
//   u32 n | u32 offsets[n + 1] | config JSON | sample 0 | ... | sample n-1
// Offsets are absolute in the raw shard; sample i is [offsets[i], offsets[i+1]). A sample
// is a u32 size for each variable-size column (those whose column_sizes entry is null),
// in column order, then every column's value in column order.
//
// Parse checks the header (n equal to the index's samples, the offsets table inside the
// shard, offsets non-decreasing, starting after the table and ending inside the shard);
// Column() checks the sample's sizes header and that the sizes add up to the sample.
// Every failure is DATA_LOSS naming the shard and, for a sample, its index.
// Holds a view of the bytes, which must outlive it. Thread-compatible (const methods are
// safe to call concurrently).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_SAMPLE_TABLE_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_SAMPLE_TABLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace zephon::pipeline::mds {

class MdsSampleTable {
 public:
  // `column_sizes[c]`: the fixed size of column c, nullopt when variable. `name` names
  // the shard in messages.
  static absl::StatusOr<MdsSampleTable> Parse(std::string name, absl::string_view bytes,
                                              uint64_t expected_samples,
                                              std::vector<std::optional<uint64_t>> column_sizes);

  uint64_t samples() const { return samples_; }
  // The bytes of column `column` (< column count) of sample `sample` (< samples()).
  absl::StatusOr<absl::string_view> Column(uint64_t sample, size_t column) const;

 private:
  MdsSampleTable(std::string name, absl::string_view bytes, uint64_t samples,
                 std::vector<std::optional<uint64_t>> column_sizes)
      : name_(std::move(name)),
        bytes_(bytes),
        samples_(samples),
        column_sizes_(std::move(column_sizes)) {}
  uint32_t Offset(uint64_t i) const;

  std::string name_;
  absl::string_view bytes_;
  uint64_t samples_;
  std::vector<std::optional<uint64_t>> column_sizes_;
};

}  // namespace zephon::pipeline::mds

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_SAMPLE_TABLE_H_

// Test helpers that write small, valid on-disk corpora (testonly).
//
// WriteMegatronShard writes `prefix`.bin / `prefix`.idx in the layout documented in
// megatron_reader.h: one sequence per doc, doc_idx = [0, 1, ..., N]. Tokens are
// stored with the given dtype code (1,2,3,4,5,8), truncating values that do not fit.
// WriteFlatFile writes raw little-endian uint16 or uint32 tokens.
// WriteTextFile writes (optionally compressed) text, e.g. JSONL shards.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_TESTING_CORPUS_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_TESTING_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include <memory>

#include "absl/status/status.h"
#include "daemon/pipeline/formats/dataset.h"

namespace zephon::pipeline::testing {

absl::Status WriteMegatronShard(const std::string& prefix,
                                const std::vector<std::vector<int32_t>>& docs,
                                uint8_t dtype_code = 8);

absl::Status WriteFlatFile(const std::string& path, const std::vector<uint32_t>& tokens,
                           bool uint32 = false);

// An in-memory dataset: shards[s][i] is sample i of shard s (format "memory").
// CHECK-fails (via .value()) on an empty dataset: tests only.
std::shared_ptr<const Dataset> MakeMemoryDataset(
    const std::string& name, const std::vector<std::vector<std::vector<int32_t>>>& shards);

// A dataset of `num_shards` shards with `per_shard` samples each; sample i of shard s
// has length 1 + (s * 7 + i * 3) % max_len tokens whose values encode (dataset_tag, s,
// i, offset) as dataset_tag * 1000000 + s * 10000 + i * 10 + offset % 10.
std::shared_ptr<const Dataset> MakeSyntheticDataset(const std::string& name,
                                                    int dataset_tag, uint32_t num_shards,
                                                    uint32_t per_shard, uint32_t max_len);

// Writes `text` to `path`, gzip-compressed if it ends in ".gz" (one member), zstd-
// compressed if it ends in ".zst" (one frame), else as is.
absl::Status WriteTextFile(const std::string& path, const std::string& text);

// A fresh empty directory under TEST_TMPDIR (or /tmp) named after `name`.
std::string MakeTempDir(const std::string& name);

// A spec whose work source lists megatron datasets with these names (placeholder
// paths: tests pair it with in-memory datasets); callers set the remaining knobs.
proto::PipelineSpec SpecOverDatasets(const std::vector<std::string>& names);

}  // namespace zephon::pipeline::testing

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_TESTING_CORPUS_H_

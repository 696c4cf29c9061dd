#include "daemon/checkpoint/dataset_content.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/pipeline/ordering/token_estimate.h"

namespace zephon::checkpoint {
namespace {

constexpr char kFix[] =
    ": the dataset changed since the checkpoint was taken, so the restored positions would "
    "point at other samples. Restore the original files, or start the run afresh";

absl::Status Changed(const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat("cannot restore: ", what, kFix));
}

}  // namespace

absl::StatusOr<std::vector<proto::DatasetContent>> DescribeDatasets(
    const std::vector<std::shared_ptr<const pipeline::Dataset>>& datasets,
    proto::WorkSourceSpec::WeightBy weight_by) {
  std::vector<proto::DatasetContent> out;
  for (const auto& ds : datasets) {
    proto::DatasetContent d;
    d.set_name(ds->name());
    if (weight_by == proto::WorkSourceSpec::TOKENS) {
      d.set_tokens_per_sample(pipeline::EstimateTokensPerSample(*ds));
    }
    for (uint32_t s = 0; s < ds->NumShards(); ++s) {
      absl::StatusOr<uint64_t> checksum = ds->ShardContentChecksum(s);
      if (!checksum.ok()) {
        return absl::Status(checksum.status().code(),
                            absl::StrCat("dataset '", ds->name(), "': ",
                                         checksum.status().message()));
      }
      proto::ShardContent* shard = d.add_shards();
      shard->set_file(ds->shard(s).FileName());
      shard->set_samples(ds->shard(s).NumSamples());
      shard->set_bytes(ds->shard(s).ByteSize());
      shard->set_checksum(*checksum);
    }
    out.push_back(std::move(d));
  }
  return out;
}

absl::Status CompareDatasets(const google::protobuf::RepeatedPtrField<proto::DatasetContent>& saved,
                             const std::vector<proto::DatasetContent>& now) {
  if (saved.empty()) return absl::OkStatus();
  if (static_cast<size_t>(saved.size()) != now.size()) {
    return Changed(absl::StrCat("the checkpoint has ", saved.size(), " datasets, this Pipeline ",
                                now.size()));
  }
  for (size_t k = 0; k < now.size(); ++k) {
    const proto::DatasetContent& was = saved[static_cast<int>(k)];
    const proto::DatasetContent& is = now[k];
    if (was.name() != is.name()) {
      return Changed(absl::StrCat("dataset ", k, " was '", was.name(), "' and is now '",
                                  is.name(), "'"));
    }
    if (was.shards_size() != is.shards_size()) {
      return Changed(absl::StrCat("dataset '", is.name(), "' had ", was.shards_size(),
                                  " shard files and now has ", is.shards_size()));
    }
    for (int s = 0; s < is.shards_size(); ++s) {
      const proto::ShardContent& a = was.shards(s);
      const proto::ShardContent& b = is.shards(s);
      const std::string where = absl::StrCat("dataset '", is.name(), "' shard ", s, " (", b.file(), ")");
      if (a.file() != b.file()) {
        return Changed(absl::StrCat("dataset '", is.name(), "' shard ", s, " was file '",
                                    a.file(), "' and is now '", b.file(), "'"));
      }
      if (a.samples() != b.samples()) {
        return Changed(absl::StrCat(where, ": sample count changed from ", a.samples(), " to ",
                                    b.samples()));
      }
      if (a.bytes() != b.bytes()) {
        return Changed(absl::StrCat(where, ": size changed from ", a.bytes(), " to ", b.bytes(),
                                    " bytes"));
      }
      if (a.checksum() != b.checksum()) {
        return Changed(absl::StrCat(
            where, ": content changed at the same size (checksum of its sample index and "
            "sampled tokens was ", absl::StrFormat("%016x", a.checksum()), ", is now ",
            absl::StrFormat("%016x", b.checksum()), ")"));
      }
    }
    // Exact comparison: both sides computed the same deterministic rule.
    if (was.has_tokens_per_sample() && is.has_tokens_per_sample() &&
        was.tokens_per_sample() != is.tokens_per_sample()) {
      return Changed(absl::StrFormat(
          "dataset '%s' measured %.17g tokens per sample (weight_by 'tokens') when the "
          "checkpoint was taken and %.17g now, which would change its mixture weight",
          is.name(), was.tokens_per_sample(), is.tokens_per_sample()));
    }
  }
  return absl::OkStatus();
}

}  // namespace zephon::checkpoint

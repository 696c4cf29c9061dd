#include "client/zephonctl/spec_source.h"

#include <algorithm>
#include <filesystem>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/request_paths.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "daemon/audit/audit_log.h"
#include "daemon/audit/step_anchors.h"
#include "daemon/audit/step_merge.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "daemon/pipeline/spec.h"
#include "google/protobuf/util/json_util.h"
#include "proto/zephon.pb.h"

namespace zephon::ctl {

absl::StatusOr<SpecSource> LoadSpecSource(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  SpecSource out;
  absl::StatusOr<proto::CheckpointState> state = checkpoint::DecodeCheckpoint(bytes);
  if (state.ok()) {
    out.spec = state->spec();
    out.checkpoint = *std::move(state);
    return out;
  }
  // JSON: an attach request (zephon.Pipeline's) or a bare PipelineSpec. Local paths in
  // it are taken relative to the current directory, as the client does.
  proto::AttachRequest request;
  const auto as_request = google::protobuf::util::JsonStringToMessage(bytes, &request);
  if (!as_request.ok() || !request.has_spec()) {
    request.Clear();
    const auto as_spec =
        google::protobuf::util::JsonStringToMessage(bytes, request.mutable_spec());
    if (!as_spec.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " is neither a checkpoint (", state.status().message(),
          ") nor a pipeline spec as JSON (", as_spec.message().as_string(),
          "); pass a checkpoint file, or the JSON of a PipelineSpec or of an attach request"));
    }
  }
  RETURN_IF_ERROR(client::AbsolutizeLocalPaths(&request));
  out.spec = request.spec();
  out.dp_degree = static_cast<uint32_t>(request.rank().dp_degree());
  return out;
}

absl::StatusOr<OpenedSpec> OpenLocator(const SpecSource& source, const std::string& path,
                                       uint32_t dp_degree, int threads,
                                       bool anchor_at_checkpoint) {
  for (const proto::OperatorSpec& op : source.spec.operators()) {
    if (op.has_tokenize()) {
      return absl::UnimplementedError(
          "pipelines with a tokenize operator are not supported here yet: their documents' "
          "lengths come from tokenizing the text (zephond's token cache)");
    }
  }
  OpenedSpec out;
  out.dp_degree = dp_degree;
  if (out.dp_degree == 0) {
    out.dp_degree = source.checkpoint ? source.checkpoint->dp_degree() : source.dp_degree;
  }
  if (out.dp_degree == 0) out.dp_degree = 1;
  ASSIGN_OR_RETURN(pipeline::ResolvedPipeline resolved,
                   pipeline::ResolvePipeline(source.spec, out.dp_degree));
  ASSIGN_OR_RETURN(std::vector<std::shared_ptr<const pipeline::Dataset>> datasets,
                   pipeline::OpenDatasets(resolved.spec));
  out.spec_hash = pipeline::SpecHash(resolved.spec, datasets);
  if (source.checkpoint && !source.checkpoint->spec_hash().empty() &&
      source.checkpoint->spec_hash() != out.spec_hash) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the datasets of ", path, " changed since the checkpoint was taken (spec hash ",
        out.spec_hash, ", the checkpoint's ", source.checkpoint->spec_hash(),
        "): the answer would describe other data than the run read"));
  }
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ASSIGN_OR_RETURN(out.locator, pipeline::StepLocator::Create(std::move(resolved),
                                                              std::move(datasets), threads));
  if (source.checkpoint && anchor_at_checkpoint) {
    // Its lane positions are exact: steps after it count from there, not from the start.
    RETURN_IF_ERROR(out.locator->Anchor(
        {source.checkpoint->lanes().begin(), source.checkpoint->lanes().end()}));
  }
  return out;
}

namespace {

// Every record of the logs in `dir` of this spec becomes an anchor (its lane, lane batch
// and start position). NOT_FOUND when `dir` holds no log.
absl::StatusOr<uint64_t> AnchorFromLogs(const std::string& dir, OpenedSpec* opened) {
  uint64_t added = 0;
  absl::Status failed;
  RETURN_IF_ERROR(audit::ForEachAuditRecord(dir, [&](proto::AuditRecord r) {
    if (!failed.ok() || r.spec_hash() != opened->spec_hash ||
        r.canonical_replicas() != opened->locator->num_lanes()) {
      return;
    }
    failed = opened->locator->AddAnchor(
        r.lane(), r.lane_batch_index(),
        pipeline::LanePosition{r.flush_group_chunk(), r.records_into_group()});
    if (!failed.ok()) {
      failed = absl::InvalidArgumentError(absl::StrCat(dir, ": ", failed.message()));
    }
    ++added;
  }));
  RETURN_IF_ERROR(failed);
  return added;
}

}  // namespace

absl::StatusOr<uint64_t> AnchorFromAudit(const std::string& dir, OpenedSpec* opened,
                                         uint64_t first, uint64_t end) {
  const std::string audit_dir = audit::ResolveAuditDir(dir);
  // The leader's merged lane rounds: one read per round.
  std::vector<audit::MergedRound> rounds;
  for (uint64_t j = first; j < end; ++j) {
    std::string hash;
    ASSIGN_OR_RETURN(std::optional<audit::MergedRound> round,
                     audit::ReadMergedRound(audit_dir, j, &hash));
    if (!round.has_value() || hash != opened->spec_hash ||
        round->starts.size() != opened->locator->num_lanes()) {
      rounds.clear();
      break;
    }
    rounds.push_back(*std::move(round));
  }
  if (end > first && rounds.size() == end - first) {
    for (const audit::MergedRound& r : rounds) {
      for (uint32_t lane = 0; lane < r.starts.size(); ++lane) {
        RETURN_IF_ERROR(opened->locator->AddAnchor(
            lane, r.lane_round, pipeline::LanePosition{r.starts[lane].first,
                                                       r.starts[lane].second}));
      }
    }
    return rounds.size() * opened->locator->num_lanes();
  }
  return AnchorFromLogs(audit_dir, opened);
}

absl::StatusOr<uint64_t> AnchorFromCache(const std::vector<std::string>& cache_dirs,
                                         OpenedSpec* opened) {
  uint64_t added = 0;
  for (const std::string& dir : cache_dirs) {
    const std::string in_cache = audit::StepAnchorDir(dir, opened->spec_hash);
    const std::string anchors = std::filesystem::is_directory(in_cache) ? in_cache : dir;
    absl::StatusOr<uint64_t> n = AnchorFromLogs(anchors, opened);
    if (absl::IsNotFound(n.status())) continue;  // none there
    RETURN_IF_ERROR(n.status());
    added += *n;
  }
  return added;
}

absl::StatusOr<uint64_t> KeepCountedAnchors(const std::string& cache_dir,
                                            const OpenedSpec& opened) {
  const pipeline::LaneOptions& lanes = opened.locator->resolved().lanes;
  if (lanes.microbatch_size == 0 || lanes.flush_every_k_chunks == 0) return 0;
  audit::StepAnchorWriter writer(
      audit::StepAnchorDir(cache_dir, opened.spec_hash),
      audit::AnchorOrigin{"", "zephonctl", opened.spec_hash, opened.locator->num_lanes()},
      lanes.flush_every_k_chunks, lanes.microbatch_size);
  absl::Status failed;
  opened.locator->ForEachCountedGroupStart(
      [&](uint32_t lane, uint64_t batch, const pipeline::LanePosition& at) {
        if (failed.ok()) failed = writer.Note(lane, batch, at.flush_group_chunk,
                                              at.records_into_group);
      });
  RETURN_IF_ERROR(failed);
  return writer.written();
}

}  // namespace zephon::ctl

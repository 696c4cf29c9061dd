// What `zephonctl which` and `zephonctl audit verify` compute from: a pipeline spec,
// read from a checkpoint or from JSON, resolved, its datasets opened and an engine
// StepLocator over them. Thread-compatible; no shared state.
#ifndef ZEPHON_CLIENT_ZEPHONCTL_SPEC_SOURCE_H_
#define ZEPHON_CLIENT_ZEPHONCTL_SPEC_SOURCE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/provenance/step_locator.h"
#include "proto/checkpoint.pb.h"
#include "proto/spec.pb.h"

namespace zephon::ctl {

// A pipeline spec, and the checkpoint it came from (if it did).
struct SpecSource {
  proto::PipelineSpec spec;
  std::optional<proto::CheckpointState> checkpoint;
  uint32_t dp_degree = 0;  // an attach request's rank.dp_degree (0: none given)
};

// `path` is a checkpoint file, a PipelineSpec as JSON, or an attach request's JSON with
// one under "spec" (zephon.Pipeline's); local dataset paths in JSON are taken relative
// to the current directory. INVALID_ARGUMENT (saying what was tried) for anything else.
absl::StatusOr<SpecSource> LoadSpecSource(const std::string& path);

struct OpenedSpec {
  std::unique_ptr<pipeline::StepLocator> locator;
  std::string spec_hash;
  uint32_t dp_degree = 1;
};

// Resolves the spec for `dp_degree` (0: the checkpoint's, else the attach request's,
// else 1), opens its datasets
// and builds a StepLocator on `threads` threads (0: the machine's cores), anchored at
// the checkpoint's lane positions when there is one (and `anchor_at_checkpoint`). Errors: UNIMPLEMENTED for a
// tokenize operator (its lengths come from tokenizing the text); FAILED_PRECONDITION
// when the datasets changed since the checkpoint (spec hash); those of resolution and
// of opening the datasets.
absl::StatusOr<OpenedSpec> OpenLocator(const SpecSource& source, const std::string& path,
                                       uint32_t dp_degree, int threads,
                                       bool anchor_at_checkpoint = true);

// Anchors `opened`'s locator with an audited run of this spec: `dir` is its audit
// directory (or the run's, holding audit/). Lane rounds [first, end) are read from the
// leader's merged records when it holds them all (one read each: any step the run
// checkpointed past is found without counting); otherwise every batch the logs record
// (their lane, lane batch and start position) becomes an anchor. Records of another
// spec hash are skipped. Returns the anchors added. Errors: those of reading the
// directory; INVALID_ARGUMENT for a position that is not one of this spec.
absl::StatusOr<uint64_t> AnchorFromAudit(const std::string& dir, OpenedSpec* opened,
                                         uint64_t first = 0, uint64_t end = 0);

// Anchors `opened`'s locator with the step anchors runs and earlier queries of this spec
// left (daemon/audit/step_anchors.h): each of `cache_dirs` is a cache directory (holding
// anchors/<spec hash>/) or such an anchors directory itself; one that holds none adds
// nothing. Returns the anchors added. Errors: those of reading a directory that exists;
// INVALID_ARGUMENT for a position that is not one of this spec.
absl::StatusOr<uint64_t> AnchorFromCache(const std::vector<std::string>& cache_dirs,
                                         OpenedSpec* opened);

// Keeps what `opened`'s locator counted as step anchors in `cache_dir`, for the next
// query (only where none lies near). Returns the anchors written. Errors: those of
// writing there.
absl::StatusOr<uint64_t> KeepCountedAnchors(const std::string& cache_dir,
                                            const OpenedSpec& opened);

}  // namespace zephon::ctl

#endif  // ZEPHON_CLIENT_ZEPHONCTL_SPEC_SOURCE_H_

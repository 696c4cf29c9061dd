// What `zephonctl which` and `zephonctl audit verify` compute from: a pipeline spec,
// read from a checkpoint or from JSON, resolved, its datasets opened and an engine
// StepLocator over them. Thread-compatible; no shared state.
#ifndef ZEPHON_CLIENT_ZEPHONCTL_SPEC_SOURCE_H_
#define ZEPHON_CLIENT_ZEPHONCTL_SPEC_SOURCE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

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
// the checkpoint's lane positions when there is one. Errors: UNIMPLEMENTED for a
// tokenize operator (its lengths come from tokenizing the text); FAILED_PRECONDITION
// when the datasets changed since the checkpoint (spec hash); those of resolution and
// of opening the datasets.
absl::StatusOr<OpenedSpec> OpenLocator(const SpecSource& source, const std::string& path,
                                       uint32_t dp_degree, int threads);

}  // namespace zephon::ctl

#endif  // ZEPHON_CLIENT_ZEPHONCTL_SPEC_SOURCE_H_

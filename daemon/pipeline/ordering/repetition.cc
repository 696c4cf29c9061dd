#include "daemon/pipeline/ordering/repetition.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "daemon/pipeline/spec_string_form.h"

namespace zephon::pipeline {
namespace {

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return p > std::numeric_limits<uint64_t>::max() ? std::numeric_limits<uint64_t>::max()
                                                  : static_cast<uint64_t>(p);
}

std::string Named(int k, const proto::DatasetSpec& d) {
  return absl::StrCat("work_source.datasets[", k, "] ('", d.name(), "')");
}

}  // namespace

std::optional<uint64_t> Repetition::AllowedPasses() const {
  switch (policy) {
    case proto::WorkSourceSpec::STOP_AFTER_PASSES:
      return passes;
    case proto::WorkSourceSpec::STOP:
      return 1;
    default:
      if (!max_repeats) return std::nullopt;
      return uint64_t{1} + *max_repeats;
  }
}

std::optional<uint64_t> Repetition::DrawLimit(uint64_t num_samples) const {
  const std::optional<uint64_t> passes = AllowedPasses();
  if (!passes) return std::nullopt;
  return SaturatingMul(*passes, num_samples);
}

absl::StatusOr<std::vector<Repetition>> ResolveRepetition(const proto::WorkSourceSpec& ws) {
  std::vector<Repetition> out;
  const bool default_reshuffle = !ws.has_reshuffle_on_repeat() || ws.reshuffle_on_repeat();
  for (int k = 0; k < ws.datasets_size(); ++k) {
    const proto::DatasetSpec& d = ws.datasets(k);
    Repetition rep;
    if (d.exhausted_policy() != proto::WorkSourceSpec::EXHAUSTED_POLICY_UNSPECIFIED) {
      absl::Status known = CheckResolved(d.exhausted_policy());
      if (!known.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(Named(k, d), ".", known.message()));
      }
      rep.policy = d.exhausted_policy();
    } else if (d.has_stop_after_passes()) {
      rep.policy = proto::WorkSourceSpec::STOP_AFTER_PASSES;
    } else {
      rep.policy = ws.exhausted_policy();
    }
    if (d.has_stop_after_passes()) {
      if (rep.policy != proto::WorkSourceSpec::STOP_AFTER_PASSES) {
        return absl::InvalidArgumentError(absl::StrCat(
            Named(k, d), " sets stop_after_passes = ", d.stop_after_passes(),
            " with exhausted_policy '", OptionName(rep.policy),
            "': stop_after_passes is its own policy (repeat until that many passes); "
            "drop one of the two for this dataset"));
      }
      if (d.has_max_repeats()) {
        return absl::InvalidArgumentError(absl::StrCat(
            Named(k, d), " sets both stop_after_passes = ", d.stop_after_passes(),
            " and max_repeats = ", d.max_repeats(),
            ": they cannot be combined (upstream semantics); keep one"));
      }
      if (d.stop_after_passes() == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(Named(k, d), ".stop_after_passes = 0: must be >= 1"));
      }
    }
    if (d.has_max_repeats() && rep.policy != proto::WorkSourceSpec::REPEAT) {
      // The message the single-policy engine gave, kept for users who match it.
      return absl::InvalidArgumentError(absl::StrCat(
          Named(k, d), ".max_repeats = ", d.max_repeats(), " needs exhausted_policy 'repeat', got '",
          OptionName(rep.policy), "'"));
    }
    rep.passes = d.has_stop_after_passes() ? d.stop_after_passes() : ws.stop_after_passes();
    if (d.has_max_repeats()) rep.max_repeats = d.max_repeats();
    rep.reshuffle = d.has_reshuffle_on_repeat() ? d.reshuffle_on_repeat() : default_reshuffle;
    out.push_back(rep);
  }
  return out;
}

std::optional<uint64_t> StreamEnd(
    const std::vector<Repetition>& reps, const std::vector<uint64_t>& num_samples,
    const std::function<std::optional<uint64_t>(size_t, uint64_t)>& last_chunk) {
  std::optional<uint64_t> floor_end;  // Max over STOP_AFTER_PASSES datasets.
  std::optional<uint64_t> cap;  // Min over STOP and bounded REPEAT datasets.
  for (size_t k = 0; k < reps.size(); ++k) {
    const std::optional<uint64_t> limit = reps[k].DrawLimit(num_samples[k]);
    if (!limit) continue;
    const std::optional<uint64_t> n = last_chunk(k, *limit);
    if (reps[k].policy == proto::WorkSourceSpec::STOP_AFTER_PASSES) {
      // A dataset never drawn again before finishing its passes does not hold the
      // stream open.
      if (n) floor_end = std::max(floor_end.value_or(0), *n);
    } else if (n) {
      cap = cap ? std::min(*cap, *n) : *n;
    }
  }
  if (floor_end && cap) return std::min(*floor_end, *cap);
  return floor_end ? floor_end : cap;
}

std::string DescribeRepetition(const Repetition& rep) {
  std::string out = OptionName(rep.policy);
  if (rep.policy == proto::WorkSourceSpec::STOP_AFTER_PASSES) {
    absl::StrAppend(&out, " ", rep.passes);
  }
  if (rep.max_repeats) absl::StrAppend(&out, ", max_repeats ", *rep.max_repeats);
  if (!rep.reshuffle) absl::StrAppend(&out, ", replayed");
  return out;
}

}  // namespace zephon::pipeline

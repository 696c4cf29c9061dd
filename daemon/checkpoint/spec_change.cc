#include "daemon/checkpoint/spec_change.h"

#include <algorithm>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/str_cat.h"
#include "daemon/pipeline/spec.h"

namespace zephon::checkpoint {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Values longer than this are cut in messages (a weights list, an inline tokenizer).
constexpr size_t kMaxShownValue = 80;

// Where data lives, not what it is: the spec hash leaves these out (spec.h).
bool IsLocation(const FieldDescriptor* f) {
  const std::string& name = f->full_name();
  return name == "zephon.proto.DatasetSpec.path" ||
         name == "zephon.proto.TokenizeSpec.tokenizer_path" ||
         name == "zephon.proto.TokenizeSpec.tokenizer_json" ||
         name == "zephon.proto.TokenizeSpec.tokenizer_config_json";
}

// A scalar's value as text format writes it ("5", "\"wrap\"", "REPEAT").
std::string Shown(const Message& m, const FieldDescriptor* f, int index) {
  std::string out;
  google::protobuf::TextFormat::PrintFieldValueToString(m, f, index, &out);
  if (out.size() > kMaxShownValue) out = absl::StrCat(out.substr(0, kMaxShownValue - 3), "...");
  return out;
}

std::string Differs(const std::string& path, const std::string& saved, const std::string& now) {
  return absl::StrCat(path, ": ", saved, " in the checkpoint, ", now, " now");
}

std::string MessageDifference(const Message& a, const Message& b, const std::string& prefix);

std::string RepeatedDifference(const Message& a, const Message& b, const FieldDescriptor* f,
                               const std::string& path) {
  const Reflection* ra = a.GetReflection();
  const Reflection* rb = b.GetReflection();
  const int na = ra->FieldSize(a, f);
  const int nb = rb->FieldSize(b, f);
  for (int i = 0; i < std::min(na, nb); ++i) {
    const std::string at = absl::StrCat(path, "[", i, "]");
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      std::string d = MessageDifference(ra->GetRepeatedMessage(a, f, i),
                                        rb->GetRepeatedMessage(b, f, i), at);
      if (!d.empty()) return d;
    } else if (Shown(a, f, i) != Shown(b, f, i)) {
      return Differs(at, Shown(a, f, i), Shown(b, f, i));
    }
  }
  if (na != nb) return Differs(path, absl::StrCat(na, " entries"), absl::StrCat(nb));
  return "";
}

std::string FieldDifference(const Message& a, const Message& b, const FieldDescriptor* f,
                            const std::string& path) {
  if (f->is_repeated()) return RepeatedDifference(a, b, f, path);
  const bool has_a = a.GetReflection()->HasField(a, f);
  const bool has_b = b.GetReflection()->HasField(b, f);
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    if (has_a && has_b) {
      return MessageDifference(a.GetReflection()->GetMessage(a, f),
                               b.GetReflection()->GetMessage(b, f), path);
    }
    if (has_a != has_b) return Differs(path, has_a ? "set" : "unset", has_b ? "set" : "unset");
    return "";
  }
  // A field without presence reads as its default when unset; one with presence
  // (proto3 `optional`, a oneof member) is "unset".
  const std::string va = has_a || !f->has_presence() ? Shown(a, f, -1) : "unset";
  const std::string vb = has_b || !f->has_presence() ? Shown(b, f, -1) : "unset";
  return va == vb ? "" : Differs(path, va, vb);
}

// Declaration order, so the first difference named is the outermost one a reader of
// spec.proto meets first.
std::string MessageDifference(const Message& a, const Message& b, const std::string& prefix) {
  const google::protobuf::Descriptor* d = a.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (IsLocation(f)) continue;
    const std::string path = prefix.empty() ? f->name() : absl::StrCat(prefix, ".", f->name());
    std::string diff = FieldDifference(a, b, f, path);
    if (!diff.empty()) return diff;
  }
  return "";
}

proto::BatchSpec* FindBatch(proto::PipelineSpec* spec) {
  for (auto& op : *spec->mutable_operators()) {
    if (op.has_batch()) return op.mutable_batch();
  }
  return nullptr;
}

const proto::BatchSpec* FindBatch(const proto::PipelineSpec& spec) {
  for (const auto& op : spec.operators()) {
    if (op.has_batch()) return &op.batch();
  }
  return nullptr;
}

absl::Status Refuse(const proto::CheckpointState& resume, const std::string& now_hash,
                    const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "this Pipeline's spec hash ", now_hash, " differs from the checkpoint's ",
      resume.spec_hash(), ": ", what, ". To resume, the datasets (and their files), work "
      "source, operators, seeds, canonical_replicas and lane_routing must be identical; "
      "batch(microbatch_size, drop_last) and mapping_strategy may change, and "
      "flush_every_k_chunks where every lane stands on a flush-group boundary of both "
      "values"));
}

// Why a data-defining field cannot change under a checkpoint.
std::string WithReason(const std::string& diff) {
  return absl::StrCat(diff, " (this field decides which samples each lane yields or in "
                      "which order, so the checkpoint's lane positions would point into "
                      "other data)");
}

}  // namespace

proto::PipelineSpec WithBatchingOf(const proto::PipelineSpec& spec,
                                   const proto::PipelineSpec& from) {
  proto::PipelineSpec out = spec;
  proto::BatchSpec* batch = FindBatch(&out);
  const proto::BatchSpec* from_batch = FindBatch(from);
  if (batch != nullptr && from_batch != nullptr) *batch = *from_batch;
  out.set_flush_every_k_chunks(from.flush_every_k_chunks());
  // Which DP group owns which lanes (lanes.h OwnedLanes); never what a lane yields.
  out.set_mapping_strategy(from.mapping_strategy());
  return out;
}

std::string FirstSpecDifference(const proto::PipelineSpec& saved,
                                const proto::PipelineSpec& now) {
  return MessageDifference(saved, now, "");
}

absl::StatusOr<ResumedSpecChanges> CheckResumedSpec(
    const proto::CheckpointState& resume, const proto::PipelineSpec& now,
    const std::string& now_hash,
    const std::vector<std::shared_ptr<const pipeline::Dataset>>& datasets) {
  if (resume.spec_hash() == now_hash) return ResumedSpecChanges{};
  const proto::PipelineSpec& saved = resume.spec();
  // The checkpoint's spec with what a restore may change taken from this Pipeline.
  ResumedSpecChanges changes;
  const proto::BatchSpec* saved_batch = FindBatch(saved);
  const proto::BatchSpec* now_batch = FindBatch(now);
  changes.batch = saved_batch != nullptr && now_batch != nullptr &&
                  !google::protobuf::util::MessageDifferencer::Equals(*saved_batch, *now_batch);
  if (saved.flush_every_k_chunks() != now.flush_every_k_chunks()) {
    changes.saved_flush_every_k_chunks = saved.flush_every_k_chunks();
  }
  changes.mapping = saved.mapping_strategy() != now.mapping_strategy();
  const proto::PipelineSpec candidate = WithBatchingOf(saved, now);
  // The hashes decide (they treat some differently spelled fields alike: an unset
  // weight_by of an older checkpoint and SAMPLES now); the field walk only names what
  // differs.
  const bool saved_reproduces = pipeline::SpecHash(saved, datasets) == resume.spec_hash();
  if (saved_reproduces && pipeline::SpecHash(candidate, datasets) == now_hash) return changes;
  const std::string diff = FirstSpecDifference(candidate, now);
  if (!diff.empty()) return Refuse(resume, now_hash, WithReason(diff));
  // Equal fields: the hashes then differ only if the files do (their fingerprints), or
  // the stored spec is not the one the checkpoint hashed.
  if (!saved_reproduces) {
    return Refuse(resume, now_hash,
                  "the datasets' files differ from the checkpoint's (their names, sample "
                  "counts or sizes)");
  }
  return Refuse(resume, now_hash, "the specs differ in a field the hash covers");
}

}  // namespace zephon::checkpoint

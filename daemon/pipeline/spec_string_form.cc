#include "daemon/pipeline/spec_string_form.h"

#include <google/protobuf/generated_enum_reflection.h>
#include <google/protobuf/unknown_field_set.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zephon::pipeline {
namespace {

using google::protobuf::EnumDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

template <typename E>
std::string NameOf(E value) {
  if (static_cast<int>(value) == 0) return "";
  const auto* v = google::protobuf::GetEnumDescriptor<E>()->FindValueByNumber(value);
  if (v == nullptr) return absl::StrCat(static_cast<int>(value));
  return absl::AsciiStrToLower(v->name());
}

// "contiguous, interleaved": the values users may name (UNSPECIFIED is not one).
std::string ValidNames(const EnumDescriptor* d) {
  std::vector<std::string> names;
  for (int i = 0; i < d->value_count(); ++i) {
    if (d->value(i)->number() != 0) names.push_back(absl::AsciiStrToLower(d->value(i)->name()));
  }
  return absl::StrJoin(names, ", ");
}

template <typename E>
absl::StatusOr<E> ParseName(const std::string& option, const std::string& name) {
  if (name.empty()) return static_cast<E>(0);
  const EnumDescriptor* d = google::protobuf::GetEnumDescriptor<E>();
  for (int i = 0; i < d->value_count(); ++i) {
    if (d->value(i)->number() != 0 && absl::AsciiStrToLower(d->value(i)->name()) == name) {
      return static_cast<E>(d->value(i)->number());
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(option, " '", name, "' unknown (", ValidNames(d), ")"));
}

template <typename E>
absl::Status CheckValue(const std::string& option, E value) {
  const EnumDescriptor* d = google::protobuf::GetEnumDescriptor<E>();
  if (static_cast<int>(value) != 0 && d->FindValueByNumber(value) != nullptr) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      option, " ", static_cast<int>(value) == 0 ? "is unset" : absl::StrCat(value, " unknown"),
      " (", ValidNames(d), ")"));
}

constexpr char kMapping[] = "mapping_strategy";
constexpr char kRouting[] = "lane_routing";
constexpr char kPolicy[] = "work_source.exhausted_policy";
constexpr char kWeightBy[] = "work_source.weight_by";
constexpr char kSpecialTokens[] = "tokenize.special_tokens";
constexpr char kOnMissing[] = "tokenize.on_missing";

// Takes the string at unknown field `number` out of `unknown` ("" when absent).
std::string TakeUnknownString(UnknownFieldSet* unknown, int number) {
  std::string value;
  for (int i = 0; i < unknown->field_count(); ++i) {
    const UnknownField& f = unknown->field(i);
    if (f.number() == number && f.type() == UnknownField::TYPE_LENGTH_DELIMITED) {
      value = f.length_delimited();
    }
  }
  unknown->DeleteByNumber(number);
  return value;
}

template <typename Message, typename E>
absl::Status Upgrade(Message* message, int number, const std::string& option,
                     void (Message::*set)(E)) {
  UnknownFieldSet* unknown = message->GetReflection()->MutableUnknownFields(message);
  const std::string name = TakeUnknownString(unknown, number);
  if (name.empty()) return absl::OkStatus();
  absl::StatusOr<E> value = ParseName<E>(option, name);
  if (!value.ok()) {
    return absl::DataLossError(absl::StrCat("spec written by an older zephond: ",
                                            value.status().message()));
  }
  (message->*set)(*value);
  return absl::OkStatus();
}

}  // namespace

std::string OptionName(proto::PipelineSpec::MappingStrategy value) { return NameOf(value); }
std::string OptionName(proto::PipelineSpec::LaneRouting value) { return NameOf(value); }
std::string OptionName(proto::WorkSourceSpec::ExhaustedPolicy value) { return NameOf(value); }
std::string OptionName(proto::WorkSourceSpec::WeightBy value) { return NameOf(value); }
std::string OptionName(proto::TokenizeSpec::SpecialTokens value) { return NameOf(value); }
std::string OptionName(proto::TokenizeSpec::OnMissing value) { return NameOf(value); }

absl::StatusOr<proto::PipelineSpec::MappingStrategy> ParseMappingStrategy(
    const std::string& name) {
  return ParseName<proto::PipelineSpec::MappingStrategy>(kMapping, name);
}
absl::StatusOr<proto::PipelineSpec::LaneRouting> ParseLaneRouting(const std::string& name) {
  return ParseName<proto::PipelineSpec::LaneRouting>(kRouting, name);
}
absl::StatusOr<proto::WorkSourceSpec::ExhaustedPolicy> ParseExhaustedPolicy(
    const std::string& name) {
  return ParseName<proto::WorkSourceSpec::ExhaustedPolicy>(kPolicy, name);
}
absl::StatusOr<proto::WorkSourceSpec::WeightBy> ParseWeightBy(const std::string& name) {
  return ParseName<proto::WorkSourceSpec::WeightBy>(kWeightBy, name);
}

absl::Status CheckResolved(proto::PipelineSpec::MappingStrategy value) {
  return CheckValue(kMapping, value);
}
absl::Status CheckResolved(proto::PipelineSpec::LaneRouting value) {
  return CheckValue(kRouting, value);
}
absl::Status CheckResolved(proto::WorkSourceSpec::ExhaustedPolicy value) {
  return CheckValue(kPolicy, value);
}
absl::Status CheckResolved(proto::WorkSourceSpec::WeightBy value) {
  return CheckValue(kWeightBy, value);
}
absl::Status CheckResolved(proto::TokenizeSpec::SpecialTokens value) {
  return CheckValue(kSpecialTokens, value);
}
absl::Status CheckResolved(proto::TokenizeSpec::OnMissing value) {
  return CheckValue(kOnMissing, value);
}

proto::PipelineSpecStringForm ToStringForm(const proto::PipelineSpec& spec) {
  proto::PipelineSpec rest = spec;
  rest.clear_mapping_strategy();
  rest.clear_lane_routing();
  // has_work_source() guards mutable_: an empty work_source would add bytes.
  if (rest.has_work_source()) {
    rest.mutable_work_source()->clear_exhausted_policy();
    // Samples hash as before weight_by existed (see the header).
    if (rest.work_source().weight_by() == proto::WorkSourceSpec::SAMPLES) {
      rest.mutable_work_source()->clear_weight_by();
    }
  }
  proto::PipelineSpecStringForm form;
  // Same numbers, same types for every field but the three: a lossless re-read.
  form.ParseFromString(rest.SerializeAsString());
  form.set_mapping_strategy(OptionName(spec.mapping_strategy()));
  form.set_lane_routing(OptionName(spec.lane_routing()));
  if (spec.has_work_source()) {
    form.mutable_work_source()->set_exhausted_policy(
        OptionName(spec.work_source().exhausted_policy()));
  }
  return form;
}

absl::Status UpgradeStringOptions(proto::PipelineSpec* spec) {
  if (absl::Status s = Upgrade(spec, 5, kMapping, &proto::PipelineSpec::set_mapping_strategy);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Upgrade(spec, 6, kRouting, &proto::PipelineSpec::set_lane_routing);
      !s.ok()) {
    return s;
  }
  if (!spec->has_work_source()) return absl::OkStatus();
  return Upgrade(spec->mutable_work_source(), 7, kPolicy,
                 &proto::WorkSourceSpec::set_exhausted_policy);
}

}  // namespace zephon::pipeline

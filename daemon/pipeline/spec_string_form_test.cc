#include "daemon/pipeline/spec_string_form.h"

#include <set>
#include <string>

#include <google/protobuf/descriptor.h>

#include "gtest/gtest.h"

namespace zephon::pipeline {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

TEST(SpecStringFormTest, NamesAreTheLowerCaseValueNames) {
  EXPECT_EQ(OptionName(proto::PipelineSpec::INTERLEAVED), "interleaved");
  EXPECT_EQ(OptionName(proto::PipelineSpec::CONTIGUOUS), "contiguous");
  EXPECT_EQ(OptionName(proto::PipelineSpec::MODULO), "modulo");
  EXPECT_EQ(OptionName(proto::PipelineSpec::PERMUTE), "permute");
  EXPECT_EQ(OptionName(proto::WorkSourceSpec::STOP_AFTER_PASSES), "stop_after_passes");
  EXPECT_EQ(OptionName(proto::WorkSourceSpec::REPEAT), "repeat");
  EXPECT_EQ(OptionName(proto::WorkSourceSpec::STOP), "stop");
  EXPECT_EQ(OptionName(proto::PipelineSpec::MAPPING_STRATEGY_UNSPECIFIED), "");
  EXPECT_EQ(OptionName(static_cast<proto::PipelineSpec::LaneRouting>(9)), "9");
}

TEST(SpecStringFormTest, ParseRoundTripsAndNamesTheOptionWhenUnknown) {
  EXPECT_EQ(ParseMappingStrategy("interleaved").value(), proto::PipelineSpec::INTERLEAVED);
  EXPECT_EQ(ParseLaneRouting("modulo").value(), proto::PipelineSpec::MODULO);
  EXPECT_EQ(ParseExhaustedPolicy("repeat").value(), proto::WorkSourceSpec::REPEAT);
  EXPECT_EQ(ParseLaneRouting("").value(), proto::PipelineSpec::LANE_ROUTING_UNSPECIFIED);
  auto bad = ParseMappingStrategy("INTERLEAVED");  // the API's names are lower case
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "mapping_strategy 'INTERLEAVED' unknown (contiguous, interleaved)");
  EXPECT_EQ(ParseExhaustedPolicy("forever").status().message(),
            "work_source.exhausted_policy 'forever' unknown (stop_after_passes, repeat, stop)");
}

TEST(SpecStringFormTest, CheckResolvedRefusesUnsetAndUnknownValues) {
  EXPECT_TRUE(CheckResolved(proto::PipelineSpec::MODULO).ok());
  auto unset = CheckResolved(proto::PipelineSpec::MAPPING_STRATEGY_UNSPECIFIED);
  EXPECT_EQ(unset.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unset.message().find("mapping_strategy is unset"), std::string::npos) << unset;
  auto unknown = CheckResolved(static_cast<proto::WorkSourceSpec::ExhaustedPolicy>(7));
  EXPECT_NE(unknown.message().find("exhausted_policy 7 unknown"), std::string::npos) << unknown;
}

// The string form must hold every field of the spec at the same number with the same
// type, except the three options, which it holds as strings: otherwise the re-read in
// ToStringForm would drop or misread a field and the hash would stop covering it.
void ExpectMirrors(const Descriptor* spec, const Descriptor* form,
                   const std::set<std::string>& as_strings) {
  for (int i = 0; i < form->field_count(); ++i) {
    const FieldDescriptor* f = form->field(i);
    SCOPED_TRACE(f->full_name());
    if (as_strings.count(f->name()) != 0) {
      EXPECT_EQ(f->type(), FieldDescriptor::TYPE_STRING);
      const FieldDescriptor* e = spec->FindFieldByName(f->name());
      ASSERT_NE(e, nullptr);
      EXPECT_EQ(e->type(), FieldDescriptor::TYPE_ENUM);
      EXPECT_NE(e->number(), f->number()) << "the enum must not reuse the string's number";
      continue;
    }
    const FieldDescriptor* same = spec->FindFieldByNumber(f->number());
    ASSERT_NE(same, nullptr);
    EXPECT_EQ(same->name(), f->name());
    EXPECT_EQ(same->label(), f->label());
    EXPECT_EQ(same->has_presence(), f->has_presence());
    if (same->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (f->message_type() != same->message_type()) {
        EXPECT_EQ(f->message_type()->name(), same->message_type()->name() + "StringForm");
      }
    } else {
      EXPECT_EQ(same->type(), f->type());
    }
  }
}

TEST(SpecStringFormTest, StringFormMirrorsTheSpec) {
  ExpectMirrors(proto::PipelineSpec::descriptor(), proto::PipelineSpecStringForm::descriptor(),
                {"mapping_strategy", "lane_routing"});
  ExpectMirrors(proto::WorkSourceSpec::descriptor(),
                proto::WorkSourceSpecStringForm::descriptor(), {"exhausted_policy"});
}

bool NoUnknownFields(const google::protobuf::Message& m) {
  return m.GetReflection()->GetUnknownFields(m).empty();
}

proto::PipelineSpec Sample() {
  proto::PipelineSpec spec;
  spec.set_format_version(1);
  spec.set_canonical_replicas(4);
  spec.set_mapping_strategy(proto::PipelineSpec::INTERLEAVED);
  spec.set_lane_routing(proto::PipelineSpec::MODULO);
  spec.set_flush_every_k_chunks(8);
  auto* ws = spec.mutable_work_source();
  ws->set_seed(7);
  ws->set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  ws->set_shuffle_block_size("auto");
  ws->add_datasets()->set_name("web");
  spec.add_operators()->mutable_batch()->set_microbatch_size(2);
  return spec;
}

TEST(SpecStringFormTest, StringFormCarriesEveryField) {
  const proto::PipelineSpecStringForm form = ToStringForm(Sample());
  EXPECT_EQ(form.mapping_strategy(), "interleaved");
  EXPECT_EQ(form.lane_routing(), "modulo");
  EXPECT_EQ(form.work_source().exhausted_policy(), "repeat");
  EXPECT_EQ(form.canonical_replicas(), 4);
  EXPECT_EQ(form.flush_every_k_chunks(), 8u);
  EXPECT_EQ(form.work_source().seed(), 7u);
  EXPECT_EQ(form.work_source().shuffle_block_size(), "auto");
  EXPECT_EQ(form.work_source().datasets(0).name(), "web");
  EXPECT_EQ(form.operators(0).batch().microbatch_size(), 2u);
  EXPECT_TRUE(NoUnknownFields(form));
  EXPECT_TRUE(NoUnknownFields(form.work_source()));
  // Without a work source none appears (an empty one would add bytes to the hash).
  EXPECT_FALSE(ToStringForm(proto::PipelineSpec()).has_work_source());
}

TEST(SpecStringFormTest, UpgradeReadsFormatOneStrings) {
  // A spec as format 1 wrote it: the string form's bytes, parsed by today's schema.
  proto::PipelineSpec old;
  ASSERT_TRUE(old.ParseFromString(ToStringForm(Sample()).SerializeAsString()));
  EXPECT_EQ(old.mapping_strategy(), proto::PipelineSpec::MAPPING_STRATEGY_UNSPECIFIED);
  ASSERT_TRUE(UpgradeStringOptions(&old).ok());
  EXPECT_EQ(old.SerializeAsString(), Sample().SerializeAsString());
  EXPECT_TRUE(NoUnknownFields(old));
  EXPECT_TRUE(NoUnknownFields(old.work_source()));
  // Upgrading a current spec changes nothing.
  proto::PipelineSpec current = Sample();
  ASSERT_TRUE(UpgradeStringOptions(&current).ok());
  EXPECT_EQ(current.SerializeAsString(), Sample().SerializeAsString());
}

TEST(SpecStringFormTest, UpgradeRefusesAnUnknownString) {
  proto::PipelineSpecStringForm form = ToStringForm(Sample());
  form.set_lane_routing("sideways");
  proto::PipelineSpec old;
  ASSERT_TRUE(old.ParseFromString(form.SerializeAsString()));
  const absl::Status s = UpgradeStringOptions(&old);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("lane_routing 'sideways' unknown (permute, modulo)"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace zephon::pipeline

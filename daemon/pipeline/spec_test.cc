#include "daemon/pipeline/spec_string_form.h"
#include "daemon/pipeline/spec.h"

#include <cmath>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "daemon/pipeline/formats/testing_corpus.h"

namespace zephon::pipeline {
namespace {

proto::PipelineSpec Minimal() {
  proto::PipelineSpec spec;
  auto* d = spec.mutable_work_source()->add_datasets();
  d->set_name("web");
  d->set_path("/data/web");
  d->set_format("flat");
  spec.add_operators()->mutable_pack_flat()->set_max_length(2049);
  spec.add_operators()->mutable_batch()->set_microbatch_size(4);
  return spec;
}

// The user-facing spellings of the three option values (Python's API strings).
void SetMapping(proto::PipelineSpec& s, const std::string& v) {
  s.set_mapping_strategy(ParseMappingStrategy(v).value());
}
void SetRouting(proto::PipelineSpec& s, const std::string& v) {
  s.set_lane_routing(ParseLaneRouting(v).value());
}
void SetPolicy(proto::PipelineSpec& s, const std::string& v) {
  s.mutable_work_source()->set_exhausted_policy(ParseExhaustedPolicy(v).value());
}
void SetWeightBy(proto::PipelineSpec& s, const std::string& v) {
  s.mutable_work_source()->set_weight_by(ParseWeightBy(v).value());
}

TEST(ResolveSpecTest, FillsEveryDefault) {
  auto r = ResolveSpec(Minimal(), 8);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->format_version(), 1u);
  EXPECT_EQ(r->canonical_replicas(), 8u);
  EXPECT_EQ(r->mapping_strategy(), proto::PipelineSpec::CONTIGUOUS);
  EXPECT_EQ(r->lane_routing(), proto::PipelineSpec::PERMUTE);
  EXPECT_EQ(r->flush_every_k_chunks(), 8u);
  EXPECT_EQ(r->work_source().chunk_size(), 1024u);
  EXPECT_EQ(r->work_source().exhausted_policy(), proto::WorkSourceSpec::STOP_AFTER_PASSES);
  EXPECT_EQ(r->work_source().weight_by(), proto::WorkSourceSpec::SAMPLES);
  EXPECT_EQ(r->work_source().stop_after_passes(), 1u);
  EXPECT_EQ(r->work_source().datasets(0).dtype(), "uint16");
  EXPECT_EQ(r->work_source().datasets(0).flat_sample_tokens(), 2048u);
  EXPECT_EQ(r->operators(0).pack_flat().algorithm(), "wrap");
  // Resolving is idempotent.
  EXPECT_EQ(ResolveSpec(*r, 8)->SerializeAsString(), r->SerializeAsString());
}

void ExpectError(const proto::PipelineSpec& spec, uint32_t dp, const std::string& needle) {
  auto r = ResolveSpec(spec, dp);
  ASSERT_FALSE(r.ok()) << needle;
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status();
}

TEST(ResolveSpecTest, RejectsBadValuesNamingThem) {
  auto s = Minimal();
  // Values this build does not know (a newer client's, or a C++ caller's cast).
  s.set_mapping_strategy(static_cast<proto::PipelineSpec::MappingStrategy>(9));
  ExpectError(s, 1, "mapping_strategy 9 unknown (contiguous, interleaved)");
  s = Minimal();
  s.set_lane_routing(static_cast<proto::PipelineSpec::LaneRouting>(9));
  ExpectError(s, 1, "lane_routing 9 unknown (permute, modulo)");
  s = Minimal();
  s.mutable_work_source()->set_exhausted_policy(
      static_cast<proto::WorkSourceSpec::ExhaustedPolicy>(9));
  ExpectError(s, 1, "exhausted_policy 9 unknown (stop_after_passes, repeat, stop)");
  s = Minimal();
  s.mutable_work_source()->set_weight_by(static_cast<proto::WorkSourceSpec::WeightBy>(9));
  ExpectError(s, 1, "work_source.weight_by 9 unknown (samples, tokens)");
  s = Minimal();
  s.set_canonical_replicas(4);
  ExpectError(s, 8, "dp_degree=8 exceeds canonical_replicas=4");
  s = Minimal();
  s.set_format_version(7);
  ExpectError(s, 1, "format_version 7");
  s = Minimal();
  s.mutable_work_source()->mutable_datasets(0)->set_format("avro");
  ExpectError(s, 1, "avro");
  s = Minimal();
  *s.mutable_work_source()->add_datasets() = s.work_source().datasets(0);
  ExpectError(s, 1, "duplicate dataset name 'web'");
  s = Minimal();
  s.mutable_work_source()->add_weights(1);
  s.mutable_work_source()->add_weights(2);
  ExpectError(s, 1, "weights");
  s = Minimal();
  s.mutable_operators(0)->mutable_pack_flat()->set_max_length(1);
  ExpectError(s, 1, "max_length");
  s = Minimal();
  s.mutable_operators()->RemoveLast();
  ExpectError(s, 1, "batch");
  s = Minimal();
  s.mutable_work_source()->set_shuffle_block_size("big");
  ExpectError(s, 1, "work_source.shuffle_block_size 'big'");
  s = Minimal();
  s.mutable_work_source()->mutable_datasets(0)->set_max_repeats(2);
  ExpectError(s, 1, "max_repeats = 2 needs exhausted_policy 'repeat', got 'stop_after_passes'");
}

TEST(ResolveSpecTest, NonFiniteWeightsNameTheDataset) {
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    auto s = Minimal();
    auto* other = s.mutable_work_source()->add_datasets();
    *other = s.work_source().datasets(0);
    other->set_name("code");
    s.mutable_work_source()->add_weights(1);
    s.mutable_work_source()->add_weights(bad);
    ExpectError(s, 1, "work_source.weights[1] (mixture weight of dataset 'code') = ");
    ExpectError(s, 1, "must be a finite number > 0");
  }
}

TEST(ResolveSpecTest, CanonicalReplicasOutsideItsBoundsIsRefused) {
  auto s = Minimal();
  s.set_canonical_replicas(0);  // explicit 0 is not "unset"
  ExpectError(s, 1, "canonical_replicas=0 is invalid");
  s.set_canonical_replicas(65'537);
  ExpectError(s, 1, "canonical_replicas=65537 is invalid: expected 1 <= canonical_replicas <= 65536");
  s.set_canonical_replicas((int64_t{1} << 32) + 2);
  ExpectError(s, 1, "canonical_replicas=4294967298 is invalid");
}

TEST(ResolveSpecTest, NewOptionsAreOffByDefaultAndKeptVerbatim) {
  auto s = Minimal();
  s.mutable_work_source()->set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  s.mutable_work_source()->mutable_datasets(0)->set_max_repeats(2);
  s.mutable_work_source()->set_shuffle_block_size("auto");
  s.mutable_work_source()->mutable_datasets(0)->set_format("jsonl");
  auto r = ResolveSpec(s, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->work_source().shuffle_block_size(), "auto");
  EXPECT_EQ(r->work_source().datasets(0).jsonl_field(), "input_ids");
  EXPECT_EQ(r->work_source().datasets(0).max_repeats(), 2u);
  auto plain = ResolveSpec(Minimal(), 1).value();
  EXPECT_EQ(plain.work_source().shuffle_block_size(), "");
  EXPECT_TRUE(plain.work_source().datasets(0).jsonl_field().empty());
  EXPECT_FALSE(plain.work_source().datasets(0).has_max_repeats());
}

TEST(ResolveSpecTest, DatasetFieldIsJsonlFieldForJsonlAndOnNullIsForRecordFormats) {
  auto data = testing::MakeSyntheticDataset("web", 1, 2, 10, 5);
  auto jsonl = [](const std::string& field, const std::string& jsonl_field) {
    proto::PipelineSpec s = Minimal();
    auto* d = s.mutable_work_source()->mutable_datasets(0);
    d->set_format("jsonl");
    d->set_field(field);
    d->set_jsonl_field(jsonl_field);
    return s;
  };
  auto generic = ResolveSpec(jsonl("ids", ""), 2);
  ASSERT_TRUE(generic.ok()) << generic.status();
  EXPECT_EQ(generic->work_source().datasets(0).jsonl_field(), "ids");
  EXPECT_TRUE(generic->work_source().datasets(0).field().empty());
  // One spelling, one spec: the same hash as jsonl_field.
  EXPECT_EQ(SpecHash(*generic, {data}), SpecHash(ResolveSpec(jsonl("", "ids"), 2).value(), {data}));
  EXPECT_TRUE(ResolveSpec(jsonl("ids", "ids"), 2).ok());
  ExpectError(jsonl("ids", "input_ids"), 2, "sets field 'ids' and jsonl_field 'input_ids'");
  proto::PipelineSpec on_null = jsonl("", "");
  on_null.mutable_work_source()->mutable_datasets(0)->set_on_null(proto::DatasetSpec::ERROR);
  ExpectError(on_null, 2, "on_null is set, but format 'jsonl' has no null records");
  on_null.mutable_work_source()->mutable_datasets(0)->set_on_null(
      static_cast<proto::DatasetSpec::OnNull>(7));
  ExpectError(on_null, 2, "on_null 7 unknown (skip, error)");
  // Auto-detected datasets keep it (Dataset::Open refuses it for a non-record format).
  proto::PipelineSpec detected = Minimal();
  detected.mutable_work_source()->mutable_datasets(0)->clear_format();
  detected.mutable_work_source()->mutable_datasets(0)->set_on_null(proto::DatasetSpec::SKIP);
  proto::PipelineSpec detected_plain = Minimal();
  detected_plain.mutable_work_source()->mutable_datasets(0)->clear_format();
  auto kept = ResolveSpec(detected, 2);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_NE(SpecHash(*kept, {data}), SpecHash(ResolveSpec(detected_plain, 2).value(), {data}));
}

TEST(SpecHashTest, IsStableAndCoversSpecAndData) {
  auto a = testing::MakeSyntheticDataset("web", 1, 2, 10, 5);
  auto b = testing::MakeSyntheticDataset("web", 1, 2, 11, 5);
  const auto spec = ResolveSpec(Minimal(), 2).value();
  const std::string h = SpecHash(spec, {a});
  EXPECT_EQ(h.size(), 16u);
  EXPECT_EQ(SpecHash(ResolveSpec(Minimal(), 2).value(), {a}), h);
  EXPECT_NE(SpecHash(spec, {b}), h);
  EXPECT_NE(SpecHash(ResolveSpec(Minimal(), 4).value(), {a}), h);
  auto seeded = spec;
  seeded.mutable_work_source()->set_seed(1);
  EXPECT_NE(SpecHash(seeded, {a}), h);
}

TEST(SpecHashTest, WhereTheFilesLiveIsNotPartOfTheHash) {
  auto a = testing::MakeSyntheticDataset("web", 1, 2, 10, 5);
  const auto spec = ResolveSpec(Minimal(), 2).value();
  auto moved = spec;
  moved.mutable_work_source()->mutable_datasets(0)->set_path("s3://bucket/corpus/web");
  EXPECT_EQ(SpecHash(moved, {a}), SpecHash(spec, {a}));
  auto renamed = spec;
  renamed.mutable_work_source()->mutable_datasets(0)->set_name("web2");
  EXPECT_NE(SpecHash(renamed, {a}), SpecHash(spec, {a}));
}

// Pinned hashes of specs written before the option enums existed (computed by the code
// that stored these three options as strings). Checkpoints carry the spec hash and restore
// refuses another one, so these must never move for the same user spec.
TEST(SpecHashTest, HashesOfExistingCheckpointsNeverMove) {
  auto data = testing::MakeSyntheticDataset("web", 1, 2, 10, 5);
  auto hash = [&](const std::function<void(proto::PipelineSpec&)>& edit) {
    proto::PipelineSpec spec = Minimal();
    edit(spec);
    return SpecHash(ResolveSpec(spec, 2).value(), {data});
  };
  EXPECT_EQ(hash([](proto::PipelineSpec&) {}), "96a7cb2ded9ca691");
  EXPECT_EQ(hash([](proto::PipelineSpec& s) { SetMapping(s, "interleaved"); }), "1d3e3bb3832a9b50");
  EXPECT_EQ(hash([](proto::PipelineSpec& s) { SetRouting(s, "modulo"); }), "6884f32b959a22c6");
  EXPECT_EQ(hash([](proto::PipelineSpec& s) { SetPolicy(s, "stop"); }), "f871323aafb0d6c9");
  EXPECT_EQ(hash([](proto::PipelineSpec& s) {
              SetPolicy(s, "repeat");
              s.mutable_work_source()->mutable_datasets(0)->set_max_repeats(3);
            }),
            "6506d7a97bb852db");
  // Spelling the defaults out is the same spec as leaving them unset.
  EXPECT_EQ(hash([](proto::PipelineSpec& s) {
              SetMapping(s, "contiguous");
              SetRouting(s, "permute");
              SetPolicy(s, "stop_after_passes");
            }),
            "96a7cb2ded9ca691");
  // weight_by came later: "samples" (resolution's default) is the spec as it was.
  EXPECT_EQ(hash([](proto::PipelineSpec& s) { SetWeightBy(s, "samples"); }), "96a7cb2ded9ca691");
}

// pack_flat's algorithm fields are unset for wrap, so a wrap spec hashes as pinned
// above; the padding algorithms are other specs, their resolved defaults spelled out
// or not.
TEST(SpecHashTest, PackingAlgorithmsAreOtherSpecsAndWrapKeepsItsHash) {
  auto data = testing::MakeSyntheticDataset("web", 1, 2, 10, 5);
  auto hash = [&](const std::function<void(proto::PackFlatSpec&)>& edit) {
    proto::PipelineSpec spec = Minimal();
    for (auto& op : *spec.mutable_operators()) {
      if (op.has_pack_flat()) edit(*op.mutable_pack_flat());
    }
    return SpecHash(ResolveSpec(spec, 2).value(), {data});
  };
  EXPECT_EQ(hash([](proto::PackFlatSpec& p) { p.set_algorithm("wrap"); }), "96a7cb2ded9ca691");
  auto best_fit = [](proto::PackFlatSpec& p) {
    p.set_algorithm("best_fit");
    p.set_num_bins(8);
    p.set_pad_token_id(0);
  };
  const std::string bf = hash(best_fit);
  EXPECT_NE(bf, "96a7cb2ded9ca691");
  EXPECT_EQ(hash([&](proto::PackFlatSpec& p) {
              best_fit(p);
              p.set_drop_oversized(true);
            }),
            bf);
  EXPECT_NE(hash([&](proto::PackFlatSpec& p) {
              best_fit(p);
              p.set_drop_oversized(false);
            }),
            bf);
  EXPECT_NE(hash([&](proto::PackFlatSpec& p) {
              best_fit(p);
              p.set_pad_token_id(1);
            }),
            bf);
  EXPECT_NE(hash([&](proto::PackFlatSpec& p) {
              best_fit(p);
              p.set_algorithm("first_fit");
            }),
            bf);
  // A default spelled out is the default: checkpoints taken without it restore.
  EXPECT_EQ(hash([&](proto::PackFlatSpec& p) {
              best_fit(p);
              p.set_flush_strategy("fifo");
            }),
            bf);
  EXPECT_NE(hash([&](proto::PackFlatSpec& p) {
              best_fit(p);
              p.set_flush_strategy("fullest");
            }),
            bf);
}

TEST(SpecHashTest, ALossMaskFormatOfValuesHashesAsUnset) {
  auto data = testing::MakeSyntheticDataset("web", 1, 2, 10, 5);
  auto hash = [&](proto::DatasetSpec::LossMaskFormat format) {
    proto::PipelineSpec spec = Minimal();
    auto* d = spec.mutable_work_source()->mutable_datasets(0);
    d->set_format("jsonl");
    d->set_loss_mask_field("mask");
    d->set_loss_mask_format(format);
    return SpecHash(ResolveSpec(spec, 2).value(), {data});
  };
  EXPECT_EQ(hash(proto::DatasetSpec::VALUES), hash(proto::DatasetSpec::LOSS_MASK_FORMAT_UNSPECIFIED));
  EXPECT_NE(hash(proto::DatasetSpec::SPANS), hash(proto::DatasetSpec::LOSS_MASK_FORMAT_UNSPECIFIED));
}

TEST(SpecHashTest, WeighingByTokensIsAnotherSpec) {
  auto data = testing::MakeSyntheticDataset("web", 1, 2, 10, 5);
  auto resolved = [](const std::string& weight_by) {
    proto::PipelineSpec spec = Minimal();
    if (!weight_by.empty()) SetWeightBy(spec, weight_by);
    return ResolveSpec(spec, 2).value();
  };
  const std::string plain = SpecHash(resolved(""), {data});
  EXPECT_EQ(SpecHash(resolved("samples"), {data}), plain);
  const proto::PipelineSpec tokens = resolved("tokens");
  EXPECT_EQ(tokens.work_source().weight_by(), proto::WorkSourceSpec::TOKENS);
  EXPECT_NE(SpecHash(tokens, {data}), plain);
  // Resolving keeps it (idempotent), and the hash is stable.
  EXPECT_EQ(SpecHash(ResolveSpec(tokens, 2).value(), {data}), SpecHash(tokens, {data}));
  EXPECT_EQ(ParseWeightBy("bytes").status().message(),
            "work_source.weight_by 'bytes' unknown (samples, tokens)");
}

TEST(OpenDatasetsTest, ErrorsNameTheDataset) {
  auto spec = Minimal();
  spec.mutable_work_source()->mutable_datasets(0)->set_path("/nonexistent/zephon/x");
  auto r = OpenDatasets(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'web'"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace zephon::pipeline

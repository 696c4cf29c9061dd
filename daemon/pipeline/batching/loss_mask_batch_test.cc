// Loss masks through packing and batching (lane_stream.h MaterializeInto): every
// algorithm places each segment's slice of its sample's mask, padding cells are 0,
// datasets without a mask are all ones, and a restore mid-group reproduces the masks
// byte for byte. The datasets are real JSONL shards converted into the token cache.
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/pipeline/batching/lane_stream.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/spec.h"

namespace zephon::pipeline {
namespace {

constexpr int kDocs = 60;

uint64_t DocLength(int doc) { return 1 + (doc * 5) % 13; }
uint8_t DocMask(int doc, uint64_t k) { return (doc * 7 + k) % 3 != 0 ? 1 : 0; }

// kDocs records of "ids" (token 1000 * doc + k) and "m" (DocMask).
std::string MaskedJsonl() {
  std::string out;
  for (int d = 0; d < kDocs; ++d) {
    std::string ids, mask;
    for (uint64_t k = 0; k < DocLength(d); ++k) {
      absl::StrAppend(&ids, k ? "," : "", 1000 * d + k);
      absl::StrAppend(&mask, k ? "," : "", int{DocMask(d, k)});
    }
    absl::StrAppend(&out, "{\"ids\":[", ids, "],\"m\":[", mask, "]}\n");
  }
  return out;
}

class LossMaskBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::MakeTempDir("loss_mask_batch_test");
    ASSERT_TRUE(testing::WriteTextFile(dir + "/sft.jsonl", MaskedJsonl()).ok());
    ASSERT_TRUE(testing::WriteTextFile(dir + "/plain.jsonl", MaskedJsonl()).ok());
    proto::PipelineSpec spec;
    auto* ws = spec.mutable_work_source();
    for (const char* name : {"sft", "plain"}) {
      auto* d = ws->add_datasets();
      d->set_name(name);
      d->set_path(absl::StrCat(dir, "/", name, ".jsonl"));
      d->set_format("jsonl");
      d->set_jsonl_field("ids");
      if (std::string(name) == "sft") d->set_loss_mask_field("m");
      ws->add_weights(1.0);
    }
    ws->set_chunk_size(4);
    ws->set_seed(3);
    spec.set_canonical_replicas(1);
    spec.set_flush_every_k_chunks(2);
    spec.add_operators()->mutable_pack_flat()->set_max_length(16);
    auto* b = spec.add_operators()->mutable_batch();
    b->set_microbatch_size(2);
    b->set_drop_last(false);
    spec_ = spec;
    OpenOptions options;
    options.cache_dir = dir + "/cache";
    datasets_ = OpenDatasets(ResolveSpec(spec, 1).value(), options).value();
    ASSERT_TRUE(datasets_[0]->HasLossMask());
    ASSERT_FALSE(datasets_[1]->HasLossMask());
  }

  proto::PipelineSpec WithAlgorithm(const std::string& algorithm) const {
    proto::PipelineSpec spec = spec_;
    auto* pack = spec.mutable_operators(0)->mutable_pack_flat();
    pack->set_algorithm(algorithm);
    if (algorithm != "wrap") pack->set_pad_token_id(0);
    if (algorithm == "first_fit" || algorithm == "best_fit") pack->set_num_bins(3);
    if (algorithm == "best_fit_wrap") {
      pack->set_candidate_pool_size(4);
      pack->set_max_candidate_age(8);
    }
    return ResolveSpec(spec, 1).value();
  }

  std::unique_ptr<LaneStream> Lane(const proto::PipelineSpec& spec, LanePosition start = {},
                                   uint64_t first = 0) const {
    std::shared_ptr<const WorkSource> ws(
        WorkSource::Create(spec.work_source(), datasets_).value());
    return LaneStream::Create(ws, LaneOptions::FromSpec(spec).value(), 0, start, first)
        .value();
  }

  proto::PipelineSpec spec_;
  std::vector<std::shared_ptr<const Dataset>> datasets_;
};

constexpr const char* kAlgorithms[] = {"wrap", "first_fit", "best_fit", "best_fit_wrap"};

TEST_F(LossMaskBatchTest, EverySegmentCarriesItsSamplesMaskAndPaddingIsMasked) {
  for (const char* algorithm : kAlgorithms) {
    SCOPED_TRACE(algorithm);
    const proto::PipelineSpec spec = WithAlgorithm(algorithm);
    ASSERT_TRUE(LaneOptions::FromSpec(spec)->loss_mask);
    auto lane = Lane(spec);
    uint64_t padding = 0, masked = 0, plain = 0;
    while (auto plan = lane->NextPlan().value()) {
      ASSERT_TRUE(plan->loss_mask);
      auto batch = Materialize(*plan, datasets_);
      ASSERT_TRUE(batch.ok()) << batch.status();
      ASSERT_EQ(batch->loss_mask.size(), batch->tokens.size());
      uint64_t cell = 0;
      for (const Segment& seg : plan->segments) {
        for (uint64_t k = 0; k < seg.count; ++k, ++cell) {
          const uint8_t got = batch->loss_mask[cell];
          if (seg.padding) {
            ++padding;
            EXPECT_EQ(got, 0) << "padding cell " << cell;
          } else if (seg.id.dataset == 0) {
            masked += got == 0;
            EXPECT_EQ(got, DocMask(static_cast<int>(seg.id.index), seg.offset + k))
                << "sample " << seg.id.index << " token " << seg.offset + k;
          } else {
            ++plain;
            EXPECT_EQ(got, 1) << "unmasked dataset, cell " << cell;
          }
        }
      }
    }
    EXPECT_GT(masked, 0u);
    EXPECT_GT(plain, 0u);
    EXPECT_EQ(padding > 0, std::string(algorithm) != "wrap");
  }
}

TEST_F(LossMaskBatchTest, RestoringAtEveryBatchEndReproducesTheMasks) {
  for (const char* algorithm : kAlgorithms) {
    SCOPED_TRACE(algorithm);
    const proto::PipelineSpec spec = WithAlgorithm(algorithm);
    std::vector<Batch> all;
    auto lane = Lane(spec);
    while (auto b = lane->Next().value()) all.push_back(*std::move(b));
    ASSERT_GT(all.size(), 4u);
    bool mid_group = false;
    for (size_t i = 0; i + 1 < all.size(); ++i) {
      mid_group = mid_group || all[i].end.records_into_group > 0;
      auto restored = Lane(spec, all[i].end, all[i].lane_batch_index + 1);
      for (size_t j = i + 1; j < all.size(); ++j) {
        auto b = restored->Next().value();
        ASSERT_TRUE(b.has_value());
        ASSERT_EQ(b->tokens, all[j].tokens) << "restored at " << i << ", batch " << j;
        ASSERT_EQ(b->loss_mask, all[j].loss_mask) << "restored at " << i << ", batch " << j;
      }
    }
    EXPECT_TRUE(mid_group);
  }
}

TEST_F(LossMaskBatchTest, PipelinesWithoutMasksHaveNoMaskTensor) {
  proto::PipelineSpec spec = spec_;
  spec.mutable_work_source()->mutable_datasets(0)->clear_loss_mask_field();
  spec = ResolveSpec(spec, 1).value();
  EXPECT_FALSE(SpecHasLossMask(spec));
  EXPECT_FALSE(LaneOptions::FromSpec(spec)->loss_mask);
  auto batch = Lane(spec)->Next().value();
  ASSERT_TRUE(batch.has_value());
  EXPECT_TRUE(batch->loss_mask.empty());
}

TEST_F(LossMaskBatchTest, TheSpecHashCoversTheMaskFieldsOnlyWhenSet) {
  proto::PipelineSpec unmasked = spec_;
  unmasked.mutable_work_source()->mutable_datasets(0)->clear_loss_mask_field();
  proto::PipelineSpec spans = spec_;
  spans.mutable_work_source()->mutable_datasets(0)->set_loss_mask_format(
      proto::DatasetSpec::SPANS);
  const std::string masked_hash = SpecHash(ResolveSpec(spec_, 1).value(), datasets_);
  const std::string unmasked_hash = SpecHash(ResolveSpec(unmasked, 1).value(), datasets_);
  EXPECT_NE(masked_hash, unmasked_hash);
  EXPECT_NE(SpecHash(ResolveSpec(spans, 1).value(), datasets_), masked_hash);
  // Unset fields are not serialized: the unmasked spec hashes as one that never had them.
  proto::PipelineSpec reset = spec_;
  reset.mutable_work_source()->mutable_datasets(0)->set_loss_mask_field("");
  EXPECT_EQ(SpecHash(ResolveSpec(reset, 1).value(), datasets_), unmasked_hash);
}

}  // namespace
}  // namespace zephon::pipeline

#include "daemon/progress_log.h"

#include <gtest/gtest.h>

#include <thread>
#include <tuple>

#include "daemon/pipeline/batching/group_stream.h"
#include "daemon/pipeline/ordering/lanes.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/formats/testing_corpus.h"

namespace zephon::daemon {
namespace {

using pipeline::Batch;
using pipeline::GroupStream;
using pipeline::LanePosition;

std::vector<std::shared_ptr<const pipeline::Dataset>> Corpus() {
  return {pipeline::testing::MakeSyntheticDataset("web", 1, 3, 37, 13),
          pipeline::testing::MakeSyntheticDataset("code", 2, 2, 23, 29)};
}

proto::PipelineSpec Spec() {
  proto::PipelineSpec spec = pipeline::testing::SpecOverDatasets({"web", "code"});
  auto* ws = spec.mutable_work_source();
  ws->set_seed(99);
  ws->set_chunk_size(4);
  ws->set_shuffle_within_shard(true);
  auto* shuffle = spec.add_operators()->mutable_shuffle();
  shuffle->set_buffer_size(3);
  shuffle->set_seed(5);
  spec.add_operators()->mutable_pack_flat()->set_max_length(7);
  spec.add_operators()->mutable_batch()->set_microbatch_size(2);
  spec.set_canonical_replicas(4);
  spec.set_flush_every_k_chunks(2);
  return pipeline::ResolveSpec(spec, 1).value();
}

std::unique_ptr<GroupStream> Stream(const std::vector<proto::LaneProgress>* restore = nullptr) {
  return GroupStream::Create(pipeline::ResolvePipeline(Spec(), 1).value(), Corpus(), {1, 3}, restore).value();
}

using Key = std::tuple<uint32_t, uint64_t, uint64_t, uint64_t>;

std::vector<Key> Keys(const std::vector<proto::LaneProgress>& progress) {
  std::vector<Key> out;
  for (const auto& p : progress) {
    out.emplace_back(p.lane(), p.next_batch_index(), p.flush_group_chunk(),
                     p.records_into_group());
  }
  return out;
}

// Records every batch of `stream` into `log`; returns the batches.
std::vector<Batch> RecordAll(GroupStream* stream, ProgressLog* log) {
  std::vector<Batch> all;
  while (auto b = stream->Next().value()) {
    EXPECT_TRUE(log->Record(all.size(), b->lane, b->lane_batch_index, b->end).ok());
    all.push_back(*b);
  }
  return all;
}

TEST(ProgressLogTest, ProgressAfterNIsWhatAFreshStreamStoppedAfterNReports) {
  auto stream = Stream();
  auto log = ProgressLog::Create(stream->Progress()).value();
  const std::vector<Batch> all = RecordAll(stream.get(), log.get());
  ASSERT_GT(all.size(), 10u);
  EXPECT_EQ(log->recorded(), all.size());
  EXPECT_EQ(Keys(log->ProgressAfter(0).value()), (std::vector<Key>{{1, 0, 0, 0}, {3, 0, 0, 0}}));
  for (size_t n = 0; n <= all.size(); ++n) {
    auto fresh = Stream();
    for (size_t i = 0; i < n; ++i) ASSERT_TRUE(fresh->NextPlan().value().has_value());
    EXPECT_EQ(Keys(log->ProgressAfter(n).value()), Keys(fresh->Progress())) << "n=" << n;
  }
  // At the end every lane is exhausted: restoring there yields nothing.
  const auto at_end = log->ProgressAfter(all.size()).value();
  EXPECT_FALSE(Stream(&at_end)->Next().value().has_value());
}

TEST(ProgressLogTest, RestoredLogStartsAtTheCheckpoint) {
  auto original = Stream();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(original->Next().value().has_value());
  const std::vector<proto::LaneProgress> checkpoint = original->Progress();
  auto restored = Stream(&checkpoint);
  auto log = ProgressLog::Create(restored->Progress()).value();
  EXPECT_EQ(Keys(log->ProgressAfter(0).value()), Keys(checkpoint));
  RecordAll(restored.get(), log.get());
  RecordAll(original.get(), ProgressLog::Create(checkpoint).value().get());
  EXPECT_EQ(Keys(log->ProgressAfter(log->recorded()).value()), Keys(original->Progress()));
}

TEST(ProgressLogTest, FoldingKeepsEveryAnswerAtOrAboveTheBase) {
  auto stream = Stream();
  auto log = ProgressLog::Create(stream->Progress()).value();
  const size_t total = RecordAll(stream.get(), log.get()).size();
  std::vector<std::vector<Key>> before;
  for (size_t n = 0; n <= total; ++n) before.push_back(Keys(log->ProgressAfter(n).value()));
  for (size_t fold : {size_t{0}, size_t{3}, size_t{3}, size_t{1}, size_t{7}, total}) {
    ASSERT_TRUE(log->FoldBelow(fold).ok());
    const size_t base = log->base();
    EXPECT_GE(base, fold);
    for (size_t n = base; n <= total; ++n) {
      EXPECT_EQ(Keys(log->ProgressAfter(n).value()), before[n]) << "fold " << fold << " n " << n;
    }
    if (base > 0) {
      auto s = log->ProgressAfter(base - 1);
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
    }
  }
  EXPECT_EQ(log->base(), total);
  auto s = log->FoldBelow(total + 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

TEST(ProgressLogTest, AskingBeyondTheRecordedBatchesFailsNamingBoth) {
  auto log = ProgressLog::Create(Stream()->Progress()).value();
  ASSERT_TRUE(log->Record(0, 1, 0, LanePosition{0, 2}).ok());
  ASSERT_TRUE(log->Record(1, 3, 0, LanePosition{0, 2}).ok());
  auto s = log->ProgressAfter(5);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("after 5 batches"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("only 2"), std::string::npos) << s.status();
}

TEST(ProgressLogTest, RecordRejectsGapsForeignLanesAndSkippedBatches) {
  auto log = ProgressLog::Create(Stream()->Progress()).value();
  EXPECT_EQ(log->Record(1, 1, 0, {}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(log->Record(0, 2, 0, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(log->Record(0, 1, 1, {}).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(log->Record(0, 1, 0, {}).ok());
  EXPECT_EQ(log->Record(0, 1, 1, {}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(log->recorded(), 1u);
}

TEST(ProgressLogTest, CreateNeedsAscendingOwnedLanes) {
  EXPECT_EQ(ProgressLog::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<proto::LaneProgress> start(2);
  start[0].set_lane(3);
  start[1].set_lane(1);
  EXPECT_EQ(ProgressLog::Create(start).status().code(), absl::StatusCode::kInvalidArgument);
}

// A producer records while the checkpoint path reads and the release path folds.
TEST(ProgressLogTest, RecordReadAndFoldMayRunConcurrently) {
  auto log = ProgressLog::Create(Stream()->Progress()).value();
  constexpr uint64_t kBatches = 20000;
  std::thread producer([&] {
    for (uint64_t seq = 0; seq < kBatches; ++seq) {
      const uint32_t lane = seq % 2 == 0 ? 1 : 3;
      ASSERT_TRUE(log->Record(seq, lane, seq / 2, LanePosition{seq, 0}).ok());
    }
  });
  uint64_t released = 0;
  while (released < kBatches) {
    const uint64_t recorded = log->recorded();
    if (recorded > released) {
      auto p = log->ProgressAfter(recorded);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_EQ((*p)[0].next_batch_index() + (*p)[1].next_batch_index(), recorded);
      released = released + (recorded - released + 1) / 2;
      ASSERT_TRUE(log->FoldBelow(released).ok());
    }
  }
  producer.join();
  EXPECT_EQ(Keys(log->ProgressAfter(kBatches).value()),
            (std::vector<Key>{{1, kBatches / 2, kBatches - 2, 0},
                              {3, kBatches / 2, kBatches - 1, 0}}));
}

}  // namespace
}  // namespace zephon::daemon

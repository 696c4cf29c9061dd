#include "shm/ring_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "absl/time/clock.h"
#include "common/fake_env.h"
#include "gtest/gtest.h"
#include "shm/ring_reader.h"
#include "shm/test_util.h"

namespace zephon::shm {
namespace {

using ::zephon::shm::testing::FdsOf;
using ::zephon::shm::testing::UniqueRingName;
using ::zephon::shm::testing::UniqueShmName;

constexpr absl::Duration kShort = absl::Milliseconds(50);
constexpr absl::Duration kLong = absl::Seconds(10);

std::unique_ptr<RingWriter> MakeWriter(uint32_t slots, uint32_t readers = 4,
                                       uint64_t payload = 4096) {
  auto writer = RingWriter::Create(UniqueRingName("w"), RingGeometry{slots, payload, readers}, "job=test ring=0");
  EXPECT_TRUE(writer.ok()) << writer.status();
  return writer.ok() ? *std::move(writer) : nullptr;
}

// Publishes one batch whose single int64 tensor "value" holds `seq`.
absl::Status PublishValue(RingWriter& writer, absl::Duration timeout = kShort) {
  absl::StatusOr<SlotWriter> slot = writer.Loan(timeout);
  if (!slot.ok()) return slot.status();
  const uint64_t shape[] = {1};
  absl::StatusOr<void*> data = slot->AddTensor("value", DType::kInt64, shape);
  if (!data.ok()) return data.status();
  const int64_t value = static_cast<int64_t>(slot->seq());
  std::memcpy(*data, &value, sizeof(value));
  return writer.Publish(*std::move(slot));
}

TEST(RingWriterTest, CreateRejectsBadGeometry) {
  for (const RingGeometry& g : {RingGeometry{3, 4096, 1}, RingGeometry{0, 4096, 1},
                                RingGeometry{4, 4096, 0}, RingGeometry{4, 0, 1},
                                RingGeometry{4, 1ull << 33, 1}}) {
    EXPECT_EQ(RingWriter::Create(UniqueRingName("bad"), g, "x").status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(RingWriterTest, CreateWritesAReadyHeaderLast) {
  auto writer = MakeWriter(8, 2, 10000);
  RingFds fds = FdsOf(*writer);
  auto data = Segment::Map(std::move(fds.data), "data", Access::kReadOnly);
  ASSERT_TRUE(data.ok()) << data.status();
  auto cursors = Segment::Map(std::move(fds.cursors), "cursors", Access::kReadWrite);
  ASSERT_TRUE(cursors.ok()) << cursors.status();
  const auto& h = *reinterpret_cast<const RingHeader*>((*data)->data());
  EXPECT_EQ(h.magic, kRingMagic);
  EXPECT_EQ(h.major, kLayoutMajor);
  EXPECT_EQ(h.header_bytes, kHeaderBytes);
  EXPECT_EQ(h.total_bytes, (*data)->size());
  EXPECT_EQ(h.cursor_bytes, (*cursors)->size());
  EXPECT_EQ(writer->total_bytes(), (*data)->size() + (*cursors)->size());
  const auto& c = *reinterpret_cast<const CursorHeader*>((*cursors)->data());
  EXPECT_EQ(c.magic, kCursorMagic);
  EXPECT_EQ(c.major, kLayoutMajor);
  EXPECT_EQ(c.generation, h.generation);
  EXPECT_EQ(c.reader_capacity, 2u);
  EXPECT_NE(h.generation, 0u);
  EXPECT_EQ(h.generation, writer->generation());
  EXPECT_EQ(h.slot_count, 8u);
  EXPECT_EQ(h.slot_stride % kPageBytes, 0u);
  EXPECT_EQ(h.state.load(), static_cast<uint32_t>(RingState::kReady));
  EXPECT_STREQ(h.label, "job=test ring=0");
  EXPECT_EQ(h.producer_pid, getpid());
  EXPECT_NE(MakeWriter(8)->generation(), writer->generation());
}

TEST(RingWriterTest, LoanTimesOutWhileAReaderLags) {
  auto writer = MakeWriter(2);
  ASSERT_TRUE(writer->AttachReader(/*rank=*/7, getpid(), 0, std::nullopt).ok());
  ASSERT_TRUE(PublishValue(*writer).ok());
  ASSERT_TRUE(PublishValue(*writer).ok());
  const absl::Time start = absl::Now();
  absl::Status s = PublishValue(*writer, absl::Milliseconds(150));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("rank 7"), absl::string_view::npos) << s;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(140));
  EXPECT_EQ(writer->published(), 2u);
  EXPECT_EQ(writer->MinGatingConsumed(), 0u);
}

TEST(RingWriterTest, ReservedReaderGatesAndAttachesAtZeroAfterTheRingFilled) {
  auto writer = MakeWriter(4);
  auto reserved = writer->ReserveReader(0);
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(PublishValue(*writer).ok());
  EXPECT_EQ(PublishValue(*writer).code(), absl::StatusCode::kDeadlineExceeded);

  auto lease = writer->AttachReader(3, getpid(), 0, *reserved);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->index, *reserved);
  auto reader = RingReader::Open(FdsOf(*writer), writer->name(), lease->index, lease->lease_epoch,
                                 writer->generation(), kLong);
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (uint64_t seq = 0; seq < 4; ++seq) {
    auto view = (*reader)->Acquire(kShort);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->seq, seq);
    EXPECT_EQ(*static_cast<const int64_t*>(view->tensors[0].data), int64_t(seq));
    ASSERT_TRUE((*reader)->Release(seq).ok());
  }
  EXPECT_TRUE(PublishValue(*writer).ok());
}

TEST(RingWriterTest, AttachAtAnOverwrittenStartFails) {
  auto writer = MakeWriter(4);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(PublishValue(*writer).ok());  // nobody gates
  // Seq 1 was overwritten by seq 5; seq 2 is still in its slot.
  auto late = writer->AttachReader(0, getpid(), 1, std::nullopt);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("overwritten"), absl::string_view::npos);
  EXPECT_EQ(writer->ReserveReader(0).status().code(), absl::StatusCode::kFailedPrecondition);
  auto ok = writer->AttachReader(0, getpid(), 2, std::nullopt);
  ASSERT_TRUE(ok.ok()) << ok.status();
  auto reader =
      RingReader::Open(FdsOf(*writer), writer->name(), ok->index, ok->lease_epoch, writer->generation(), kLong);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto view = (*reader)->Acquire(kShort);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->seq, 2u);
}

TEST(RingWriterTest, AttachIsAtomicWithTheProducersLoanDecision) {
  // The producer runs flat out with nobody gating; attaching at "the latest seq" races
  // with it. Every successful attach must find its start seq intact in the ring.
  auto writer = MakeWriter(2);
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    while (!stop.load()) {
      absl::Status s = PublishValue(*writer, absl::Milliseconds(20));
      if (!s.ok() && s.code() != absl::StatusCode::kDeadlineExceeded) break;
    }
  });
  int attached = 0;
  for (int i = 0; i < 200; ++i) {
    const uint64_t start = writer->published();
    auto lease = writer->AttachReader(0, getpid(), start, std::nullopt);
    if (!lease.ok()) {
      EXPECT_EQ(lease.status().code(), absl::StatusCode::kFailedPrecondition);
      continue;
    }
    ++attached;
    auto reader = RingReader::Open(FdsOf(*writer), writer->name(), lease->index, lease->lease_epoch,
                                   writer->generation(), kLong);
    ASSERT_TRUE(reader.ok()) << reader.status();
    auto view = (*reader)->Acquire(kLong);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->seq, start);
    EXPECT_EQ(*static_cast<const int64_t*>(view->tensors[0].data), int64_t(start));
    writer->DetachReader(lease->index);
  }
  stop = true;
  producer.join();
  EXPECT_GT(attached, 0);
}

TEST(RingWriterTest, DetachAndReleaseReservationStopGating) {
  auto writer = MakeWriter(2);
  auto lease = writer->AttachReader(0, getpid(), 0, std::nullopt);
  auto reserved = writer->ReserveReader(0);
  ASSERT_TRUE(lease.ok() && reserved.ok());
  ASSERT_TRUE(PublishValue(*writer).ok());
  ASSERT_TRUE(PublishValue(*writer).ok());
  EXPECT_EQ(PublishValue(*writer).code(), absl::StatusCode::kDeadlineExceeded);
  writer->DetachReader(lease->index);
  EXPECT_EQ(PublishValue(*writer).code(), absl::StatusCode::kDeadlineExceeded);
  writer->ReleaseReservation(*reserved);
  EXPECT_TRUE(PublishValue(*writer).ok());
  // Both records are reusable.
  EXPECT_TRUE(writer->ReserveReader(writer->published()).ok());
  EXPECT_TRUE(writer->AttachReader(1, getpid(), writer->published(), std::nullopt).ok());
}

TEST(RingWriterTest, ReadersSnapshotShowsStateRankPidAndCursor) {
  auto writer = MakeWriter(4, 3);
  auto reserved = writer->ReserveReader(0);
  auto lease = writer->AttachReader(5, 4242, 0, std::nullopt);
  ASSERT_TRUE(reserved.ok() && lease.ok());
  auto readers = writer->Readers();
  ASSERT_EQ(readers.size(), 2u);
  EXPECT_EQ(readers[0].state, ReaderState::kReserved);
  EXPECT_EQ(readers[1].state, ReaderState::kAttached);
  EXPECT_EQ(readers[1].rank, 5);
  EXPECT_EQ(readers[1].pid, 4242);
  EXPECT_EQ(readers[1].lease_epoch, 1u);
  EXPECT_EQ(readers[1].consumed, 0u);
  auto too_many = writer->AttachReader(6, 1, 0, std::nullopt);
  ASSERT_TRUE(too_many.ok());
  EXPECT_EQ(writer->AttachReader(7, 1, 0, std::nullopt).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(writer->AttachReader(7, 1, 0, /*reserved_index=*/1).status().code(),
            absl::StatusCode::kFailedPrecondition);  // attached, not reserved
}

TEST(RingWriterTest, AbandonedLoanIsLoanedAgainAndDoubleLoanFails) {
  auto writer = MakeWriter(4);
  {
    auto slot = writer->Loan(kShort);
    ASSERT_TRUE(slot.ok());
    EXPECT_EQ(slot->seq(), 0u);
    EXPECT_EQ(writer->Loan(kShort).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  auto again = writer->Loan(kShort);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->seq(), 0u);
}

TEST(RingWriterTest, AddTensorRejectsWhatDoesNotFit) {
  auto writer = MakeWriter(2, 1, /*payload=*/1024);
  auto slot = writer->Loan(kShort);
  ASSERT_TRUE(slot.ok());
  const uint64_t big[] = {1000};
  auto too_big = slot->AddTensor("x", DType::kFloat32, big);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.status().message().find("needs 4000 bytes"), absl::string_view::npos)
      << too_big.status();
  EXPECT_NE(too_big.status().message().find("capacity is 1024 bytes"), absl::string_view::npos);
  const uint64_t rank5[] = {1, 1, 1, 1, 1};
  EXPECT_EQ(slot->AddTensor("x", DType::kUInt8, rank5).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(slot->AddTensor(std::string(25, 'n'), DType::kUInt8, {1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (int i = 0; i < 8; ++i) {
    auto t = slot->AddTensor("t" + std::to_string(i), DType::kUInt8, {3});
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*t) % kTensorAlignment, 0u);
  }
  EXPECT_EQ(slot->AddTensor("t8", DType::kUInt8, {1}).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(RingWriterTest, CloseAndPoisonCancelABlockedLoan) {
  for (bool poison : {false, true}) {
    auto writer = MakeWriter(1);
    ASSERT_TRUE(writer->AttachReader(0, getpid(), 0, std::nullopt).ok());
    ASSERT_TRUE(PublishValue(*writer).ok());
    absl::Status blocked;
    absl::Time returned;
    std::thread producer([&] {
      blocked = PublishValue(*writer, kLong);
      returned = absl::Now();
    });
    absl::SleepFor(absl::Milliseconds(150));
    const absl::Time start = absl::Now();
    if (poison) {
      writer->Poison(2, "rank 2 disconnected");
    } else {
      writer->Close();
    }
    producer.join();
    EXPECT_EQ(blocked.code(), absl::StatusCode::kCancelled) << blocked;
    EXPECT_LT(returned - start, absl::Milliseconds(500));
    EXPECT_EQ(PublishValue(*writer).code(), absl::StatusCode::kCancelled);
    EXPECT_EQ(writer->AttachReader(0, 1, 1, std::nullopt).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

TEST(RingWriterTest, ReadersGetAReadOnlyDataFdAndCannotResizeEither) {
  auto writer = MakeWriter(2);
  RingFds fds = FdsOf(*writer);
  EXPECT_EQ(fcntl(fds.data.get(), F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_NE(ftruncate(fds.data.get(), 4096), 0);
  EXPECT_NE(ftruncate(fds.cursors.get(), 4096), 0);
  EXPECT_EQ(errno, EPERM);  // sealed
  EXPECT_EQ(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds.data.get(), 0),
            MAP_FAILED);
  // The producer keeps working.
  EXPECT_TRUE(PublishValue(*writer).ok());
  EXPECT_EQ(writer->published(), 1u);
}

TEST(RingWriterTest, TheRingLeavesNoNameInDevShm) {
  auto writer = MakeWriter(2);
  EXPECT_NE(access(("/dev/shm/" + writer->name()).c_str(), F_OK), 0);
}

TEST(RingWriterTest, MemfdCreationFailureIsAClearStatusAndLeavesNothingBehind) {
  FakeEnv env;
  const std::string name = UniqueRingName("memfd-fault");
  for (const int err : {EMFILE, ENOMEM}) {
    env.FailNext(FakeEnv::Op::kMemfd, 1, err);
    auto writer = RingWriter::Create(name, RingGeometry{4, 256, 1}, "job=test", &env);
    ASSERT_FALSE(writer.ok());
    const absl::Status& s = writer.status();
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_NE(s.message().find("ring segment " + name), std::string::npos) << s;
    EXPECT_NE(s.message().find("memfd_create(" + name + ")"), std::string::npos) << s;
    EXPECT_NE(s.message().find("ulimit -n"), std::string::npos) << s;  // the fix
  }
  EXPECT_EQ(env.faults_fired(FakeEnv::Op::kMemfd), 2);
  // The faults were for two creations only: the same ring can be made now.
  auto writer = RingWriter::Create(name, RingGeometry{4, 256, 1}, "job=test", &env);
  EXPECT_TRUE(writer.ok()) << writer.status();
}

}  // namespace
}  // namespace zephon::shm

#include "shm/ring_reader.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "shm/ring_writer.h"
#include "shm/segment.h"
#include "shm/test_util.h"

namespace zephon::shm {
namespace {

using ::zephon::shm::testing::FdsOf;
using ::zephon::shm::testing::UniqueRingName;
using ::zephon::shm::testing::UniqueShmName;

constexpr absl::Duration kShort = absl::Milliseconds(50);
constexpr absl::Duration kLong = absl::Seconds(10);

// A writer plus helpers to attach readers and publish recognisable batches:
// "tokens" int32[2,4] = seq * 100 + i, "positions" int64[4] = i.
class RingFixture : public ::testing::Test {
 protected:
  void MakeRing(uint32_t slots, uint32_t readers = 4) {
    auto writer = RingWriter::Create(UniqueRingName("r"), RingGeometry{slots, 8192, readers}, "reader-test");
    ASSERT_TRUE(writer.ok()) << writer.status();
    writer_ = *std::move(writer);
  }

  std::unique_ptr<RingReader> Attach(int32_t rank, uint64_t start = 0,
                                     absl::Duration producer_timeout = kLong) {
    auto lease = writer_->AttachReader(rank, getpid(), start, std::nullopt);
    EXPECT_TRUE(lease.ok()) << lease.status();
    auto reader = RingReader::Open(FdsOf(*writer_), writer_->name(), lease->index, lease->lease_epoch,
                                   writer_->generation(), producer_timeout);
    EXPECT_TRUE(reader.ok()) << reader.status();
    return reader.ok() ? *std::move(reader) : nullptr;
  }

  absl::Status Publish(absl::Duration timeout = kShort) {
    absl::StatusOr<SlotWriter> slot = writer_->Loan(timeout);
    if (!slot.ok()) return slot.status();
    const uint64_t seq = slot->seq();
    auto tokens = slot->AddTensor("tokens", DType::kInt32, {2, 4});
    auto positions = slot->AddTensor("positions", DType::kInt64, {4});
    if (!tokens.ok()) return tokens.status();
    if (!positions.ok()) return positions.status();
    for (int i = 0; i < 8; ++i) static_cast<int32_t*>(*tokens)[i] = int32_t(seq * 100 + i);
    for (int i = 0; i < 4; ++i) static_cast<int64_t*>(*positions)[i] = i;
    slot->set_lane(seq % 3);
    slot->set_lane_batch_index(seq / 3);
    return writer_->Publish(*std::move(slot));
  }

  static void ExpectBatch(const SlotView& view, uint64_t seq) {
    EXPECT_EQ(view.seq, seq);
    EXPECT_EQ(view.lane, seq % 3);
    EXPECT_EQ(view.lane_batch_index, seq / 3);
    ASSERT_EQ(view.tensors.size(), 2u);
    const TensorView* tokens = view.Find("tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->dtype, DType::kInt32);
    EXPECT_EQ(tokens->shape, (std::vector<uint64_t>{2, 4}));
    EXPECT_EQ(tokens->bytes, 32u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(tokens->data) % kTensorAlignment, 0u);
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(static_cast<const int32_t*>(tokens->data)[i], int32_t(seq * 100 + i));
    }
    const TensorView* positions = view.Find("positions");
    ASSERT_NE(positions, nullptr);
    EXPECT_EQ(static_cast<const int64_t*>(positions->data)[3], 3);
  }

  std::unique_ptr<RingWriter> writer_;
};

using RingReaderTest = RingFixture;

TEST_F(RingReaderTest, TwoReadersEachSeeEveryBatchInOrder) {
  MakeRing(4);
  constexpr uint64_t kBatches = 200;
  std::unique_ptr<RingReader> readers[2] = {Attach(0), Attach(1)};
  std::thread producer([&] {
    for (uint64_t i = 0; i < kBatches; ++i) ASSERT_TRUE(Publish(kLong).ok());
    ASSERT_TRUE(writer_->PublishEndOfStream(kLong).ok());
  });
  std::vector<std::thread> consumers;
  for (auto& reader : readers) {
    consumers.emplace_back([&reader] {
      for (uint64_t seq = 0; seq < kBatches; ++seq) {
        auto view = reader->Acquire(kLong);
        ASSERT_TRUE(view.ok()) << view.status();
        ExpectBatch(*view, seq);
        ASSERT_TRUE(reader->Release(seq).ok());
      }
      auto end = reader->Acquire(kLong);
      EXPECT_EQ(end.status().code(), absl::StatusCode::kOutOfRange);
      EXPECT_NE(end.status().message().find("end of data"), absl::string_view::npos);
      EXPECT_EQ(reader->Acquire(kShort).status().code(), absl::StatusCode::kOutOfRange);
    });
  }
  producer.join();
  for (auto& t : consumers) t.join();
  EXPECT_EQ(readers[0]->released(), kBatches + 1);  // the end-of-stream slot too
  EXPECT_EQ(writer_->MinGatingConsumed(), kBatches + 1);
}

TEST_F(RingReaderTest, SlotsAreReusedOnlyAfterEveryReaderReleased) {
  MakeRing(2);
  auto fast = Attach(0);
  auto slow = Attach(1);
  ASSERT_TRUE(Publish().ok());
  ASSERT_TRUE(Publish().ok());
  for (uint64_t seq = 0; seq < 2; ++seq) {
    ASSERT_TRUE(fast->Acquire(kShort).ok());
    ASSERT_TRUE(fast->Release(seq).ok());
  }
  EXPECT_EQ(Publish().code(), absl::StatusCode::kDeadlineExceeded);  // slow holds seq 0
  auto view = slow->Acquire(kShort);
  ASSERT_TRUE(view.ok());
  ExpectBatch(*view, 0);  // untouched while the producer waited
  ASSERT_TRUE(slow->Release(0).ok());
  EXPECT_TRUE(Publish().ok());
}

TEST_F(RingReaderTest, ReleasingWakesABlockedProducer) {
  MakeRing(1);
  auto reader = Attach(0);
  ASSERT_TRUE(Publish().ok());
  absl::Time published_at;
  std::thread producer([&] {
    EXPECT_TRUE(Publish(kLong).ok());
    published_at = absl::Now();
  });
  absl::SleepFor(absl::Milliseconds(300));  // well past the spin: the producer sleeps
  ASSERT_TRUE(reader->Acquire(kShort).ok());
  const absl::Time released_at = absl::Now();
  ASSERT_TRUE(reader->Release(0).ok());
  producer.join();
  EXPECT_LT(published_at - released_at, absl::Milliseconds(90));  // woken, not polled
}

TEST_F(RingReaderTest, MultipleLoansWithOutOfOrderReleases) {
  MakeRing(4);
  auto reader = Attach(0);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Publish().ok());
  for (uint64_t seq = 0; seq < 3; ++seq) {
    auto view = reader->Acquire(kShort);
    ASSERT_TRUE(view.ok());
    ExpectBatch(*view, seq);
  }
  EXPECT_TRUE(reader->Release(2).ok());
  EXPECT_TRUE(reader->Release(1).ok());
  EXPECT_EQ(reader->released(), 0u);
  EXPECT_EQ(writer_->MinGatingConsumed(), 0u);
  EXPECT_EQ(reader->Release(2).code(), absl::StatusCode::kInvalidArgument);  // twice
  EXPECT_EQ(reader->Release(3).code(), absl::StatusCode::kInvalidArgument);  // not loaned
  EXPECT_TRUE(reader->Release(0).ok());
  EXPECT_EQ(reader->released(), 3u);
  EXPECT_EQ(writer_->MinGatingConsumed(), 3u);
  EXPECT_EQ(reader->Release(0).code(), absl::StatusCode::kInvalidArgument);
  auto view = reader->Acquire(kShort);
  ASSERT_TRUE(view.ok());
  ExpectBatch(*view, 3);
}

TEST_F(RingReaderTest, PoisonIsReportedWithTheRankEvenToABlockedReader) {
  MakeRing(4);
  auto reader = Attach(0);
  auto dead = writer_->AttachReader(3, 999, 0, std::nullopt);
  ASSERT_TRUE(Publish().ok());
  absl::Status blocked;
  std::thread waiter([&] {
    ASSERT_TRUE(reader->Acquire(kShort).ok());
    blocked = reader->Acquire(kLong).status();
  });
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  writer_->MarkReaderDead(dead->index, 3, "Attach stream closed");
  waiter.join();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_EQ(blocked.code(), absl::StatusCode::kAborted) << blocked;
  EXPECT_NE(blocked.message().find("rank 3"), absl::string_view::npos) << blocked;
  EXPECT_NE(blocked.message().find("Attach stream closed"), absl::string_view::npos);
  EXPECT_EQ(writer_->Readers()[1].state, ReaderState::kDead);
  // Sticky, and new readers cannot open the poisoned ring.
  EXPECT_EQ(reader->Acquire(kShort).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(RingReader::Open(FdsOf(*writer_), writer_->name(), 0, 1, writer_->generation(), kLong)
                .status()
                .code(),
            absl::StatusCode::kAborted);
}

TEST_F(RingReaderTest, LongPoisonReasonsArriveWholeAndMinorZeroReadersGetTheHead) {
  MakeRing(4);
  auto reader = Attach(0);
  // An object-store error: URL, sample, HTTP status and curl detail outgrow 256 bytes.
  std::string reason = "pipeline error in zephond: lane 3 batch 7: GET s3://bucket/";
  while (reason.size() < 700) reason += "very/long/key/";
  reason += " HTTP 503 SlowDown";
  writer_->Poison(-1, reason);
  const absl::Status status = reader->Acquire(kShort).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find(reason), absl::string_view::npos) << status;
  // A minor-0 reader sees poison_reason: the first kPoisonReasonBytes - 1 bytes.
  const auto* h = reinterpret_cast<const RingHeader*>(writer_->TEST_data());
  EXPECT_EQ(h->minor, kLayoutMinor);
  EXPECT_EQ(std::string(h->poison_reason), reason.substr(0, kPoisonReasonBytes - 1));
}

TEST_F(RingReaderTest, CloseWakesABlockedReaderAfterItDrains) {
  MakeRing(4);
  auto reader = Attach(0);
  ASSERT_TRUE(Publish().ok());
  absl::Status blocked;
  absl::Time returned;
  std::thread waiter([&] {
    auto first = reader->Acquire(kShort);
    ASSERT_TRUE(first.ok());
    blocked = reader->Acquire(kLong).status();
    returned = absl::Now();
  });
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  writer_->Close();
  waiter.join();
  EXPECT_EQ(blocked.code(), absl::StatusCode::kCancelled) << blocked;
  EXPECT_LT(returned - start, absl::Milliseconds(500));
}

TEST_F(RingReaderTest, ClosedRingStillDeliversWhatWasPublished) {
  MakeRing(4);
  auto reader = Attach(0);
  ASSERT_TRUE(Publish().ok());
  writer_->Close();
  auto view = reader->Acquire(kShort);
  ASSERT_TRUE(view.ok()) << view.status();
  ExpectBatch(*view, 0);
  EXPECT_EQ(reader->Acquire(kShort).status().code(), absl::StatusCode::kCancelled);
}

TEST_F(RingReaderTest, StaleProducerHeartbeatIsUnavailableWithinTheTimeout) {
  MakeRing(4);
  auto reader = Attach(0, 0, /*producer_timeout=*/absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  absl::Status s = reader->Acquire(kLong).status();  // nobody heartbeats
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("zephond stopped responding"), absl::string_view::npos) << s;
  EXPECT_LT(took, absl::Milliseconds(200) + absl::Milliseconds(300));
}

TEST_F(RingReaderTest, HeartbeatKeepsAnIdleReaderWaiting) {
  MakeRing(4);
  auto reader = Attach(0, 0, /*producer_timeout=*/absl::Milliseconds(150));
  std::atomic<bool> stop{false};
  std::thread beat([&] {
    while (!stop) {
      writer_->Heartbeat();
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  EXPECT_EQ(reader->Acquire(absl::Milliseconds(400)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  stop = true;
  beat.join();
}

TEST_F(RingReaderTest, DetachedLeaseIsRevoked) {
  MakeRing(4);
  auto reader = Attach(0);
  ASSERT_TRUE(Publish().ok());
  writer_->DetachReader(0);
  EXPECT_EQ(reader->Acquire(kShort).status().code(), absl::StatusCode::kFailedPrecondition);
  // A new lease on the same record fences the old epoch off.
  auto lease = writer_->AttachReader(1, getpid(), 1, std::nullopt);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->index, 0u);
  EXPECT_EQ(lease->lease_epoch, 2u);
  EXPECT_EQ(RingReader::Open(FdsOf(*writer_), writer_->name(), 0, 1, writer_->generation(), kLong)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

// ---- Corruption: every case is an error, never a crash or an out-of-bounds read. -------

struct HeaderCase {
  const char* name;
  std::function<void(RingHeader&)> corrupt;
  absl::StatusCode code;
  const char* message;
};

TEST_F(RingReaderTest, CorruptHeadersAreRejected) {
  const HeaderCase cases[] = {
      {"bad magic", [](RingHeader& h) { h.magic = 0x1234; },
       absl::StatusCode::kFailedPrecondition, "bad magic"},
      {"major 99", [](RingHeader& h) { h.major = 99; }, absl::StatusCode::kFailedPrecondition,
       "layout version 99.1 but this reader supports major version 2"},
      // A layout-1 ring (one read-write /dev/shm segment) is refused by name.
      {"major 1", [](RingHeader& h) { h.major = 1; }, absl::StatusCode::kFailedPrecondition,
       "layout version 1.1 but this reader supports major version 2"},
      {"total beyond mapping", [](RingHeader& h) { h.total_bytes = 1ull << 40; },
       absl::StatusCode::kFailedPrecondition, "exceeds the mapping"},
      {"header_bytes small", [](RingHeader& h) { h.header_bytes = 16; },
       absl::StatusCode::kFailedPrecondition, "header_bytes"},
      {"slot_count 3", [](RingHeader& h) { h.slot_count = 3; },
       absl::StatusCode::kFailedPrecondition, "power of two"},
      {"slot_count 0", [](RingHeader& h) { h.slot_count = 0; },
       absl::StatusCode::kFailedPrecondition, "power of two"},
      {"reader_capacity 0", [](RingHeader& h) { h.reader_capacity = 0; },
       absl::StatusCode::kFailedPrecondition, "reader_capacity"},
      {"stride not page", [](RingHeader& h) { h.slot_stride += 1; },
       absl::StatusCode::kFailedPrecondition, "slot_stride"},
      {"payload > stride", [](RingHeader& h) { h.slot_payload_bytes = h.slot_stride; },
       absl::StatusCode::kFailedPrecondition, "slot_stride"},
      {"slots beyond end", [](RingHeader& h) { h.slot_count = 1024; },
       absl::StatusCode::kFailedPrecondition, "section offsets"},
      {"offset overflow", [](RingHeader& h) { h.payload_offset = ~0ull - 4095; },
       absl::StatusCode::kFailedPrecondition, "section offsets"},
      {"table inside cursor header", [](RingHeader& h) { h.reader_table_offset = 128; },
       absl::StatusCode::kFailedPrecondition, "reader table"},
      {"table beyond cursor segment", [](RingHeader& h) { h.cursor_bytes = 1ull << 40; },
       absl::StatusCode::kFailedPrecondition, "reader table"},
      {"descriptors inside header", [](RingHeader& h) { h.descriptor_offset = 128; },
       absl::StatusCode::kFailedPrecondition, "section offsets"},
      {"bad generation", [](RingHeader& h) { h.generation ^= 1; },
       absl::StatusCode::kFailedPrecondition, "stale segment"},
      {"initialising", [](RingHeader& h) { h.magic = 0; h.state.store(0); },
       absl::StatusCode::kUnavailable, "not initialised"},
      {"unknown state", [](RingHeader& h) { h.state.store(77); },
       absl::StatusCode::kFailedPrecondition, "unknown state"},
  };
  for (const HeaderCase& c : cases) {
    SCOPED_TRACE(c.name);
    MakeRing(4, 2);
    auto lease = writer_->AttachReader(0, getpid(), 0, std::nullopt);
    ASSERT_TRUE(lease.ok());
    c.corrupt(*reinterpret_cast<RingHeader*>(writer_->TEST_data()));
    auto reader = RingReader::Open(FdsOf(*writer_), writer_->name(), lease->index, lease->lease_epoch,
                                   writer_->generation(), kLong);
    ASSERT_FALSE(reader.ok());
    EXPECT_EQ(reader.status().code(), c.code) << reader.status();
    EXPECT_NE(reader.status().message().find(c.message), absl::string_view::npos)
        << reader.status();
  }
}

TEST_F(RingReaderTest, BadLeasesAndTinySegmentsAreRejected) {
  MakeRing(4, 2);
  auto lease = writer_->AttachReader(0, getpid(), 0, std::nullopt);
  ASSERT_TRUE(lease.ok());
  const uint64_t gen = writer_->generation();
  EXPECT_EQ(RingReader::Open(FdsOf(*writer_), writer_->name(), 0, 2, gen, kLong).status().code(),
            absl::StatusCode::kFailedPrecondition);  // wrong epoch
  EXPECT_EQ(RingReader::Open(FdsOf(*writer_), writer_->name(), 1, 0, gen, kLong).status().code(),
            absl::StatusCode::kFailedPrecondition);  // free record
  EXPECT_EQ(RingReader::Open(FdsOf(*writer_), writer_->name(), 2, 1, gen, kLong).status().code(),
            absl::StatusCode::kFailedPrecondition);  // out of range
  // A tiny sealed segment in place of either half of the ring.
  auto tiny = Segment::Create(UniqueRingName("tiny"), 100);
  ASSERT_TRUE(tiny.ok());
  RingFds small_data = FdsOf(*writer_);
  small_data.data = *(*tiny)->OpenReadOnly();
  EXPECT_EQ(RingReader::Open(std::move(small_data), "tiny", 0, 1, gen, kLong).status().code(),
            absl::StatusCode::kFailedPrecondition);
  RingFds small_cursors = FdsOf(*writer_);
  small_cursors.cursors = *(*tiny)->Dup();
  EXPECT_EQ(RingReader::Open(std::move(small_cursors), "tiny", 0, 1, gen, kLong).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // No fds at all.
  EXPECT_EQ(RingReader::Open(RingFds{}, "none", 0, 1, gen, kLong).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RingReaderTest, CursorSegmentOfAnotherRingIsRejected) {
  MakeRing(4, 2);
  auto lease = writer_->AttachReader(0, getpid(), 0, std::nullopt);
  ASSERT_TRUE(lease.ok());
  auto other = RingWriter::Create(UniqueRingName("other"), RingGeometry{4, 8192, 2}, "other");
  ASSERT_TRUE(other.ok());
  RingFds mixed = FdsOf(*writer_);
  mixed.cursors = std::move(FdsOf(**other).cursors);
  auto reader = RingReader::Open(std::move(mixed), writer_->name(), lease->index,
                                 lease->lease_epoch, writer_->generation(), kLong);
  ASSERT_EQ(reader.status().code(), absl::StatusCode::kFailedPrecondition) << reader.status();
  EXPECT_NE(reader.status().message().find("does not belong to this ring"), std::string::npos)
      << reader.status();
}

TEST_F(RingReaderTest, ReaderMapsTheBatchAreaReadOnly) {
  MakeRing(4, 1);
  auto reader = Attach(0);
  ASSERT_TRUE(Publish().ok());
  auto view = reader->Acquire(kShort);
  ASSERT_TRUE(view.ok()) << view.status();
  // The reader's mapping of the data segment cannot be made writable.
  void* page = const_cast<uint8_t*>(reader->mapping());
  EXPECT_NE(mprotect(page, 4096, PROT_READ | PROT_WRITE), 0);
  EXPECT_EQ(errno, EACCES);
}

struct SlotCase {
  const char* name;
  std::function<void(SlotDescriptor&, TensorEntry*)> corrupt;
};

TEST_F(RingReaderTest, CorruptSlotsAreDataLoss) {
  const SlotCase cases[] = {
      {"seq mismatch", [](SlotDescriptor& d, TensorEntry*) { d.seq.store(12345); }},
      {"too many tensors", [](SlotDescriptor& d, TensorEntry*) { d.tensor_count = 9; }},
      {"table offset beyond slot",
       [](SlotDescriptor& d, TensorEntry*) { d.table_offset = 0xFFFFFFC0u; }},
      {"data offset beyond slot", [](SlotDescriptor&, TensorEntry* t) { t[0].data_offset = 1u << 30; }},
      {"data offset unaligned", [](SlotDescriptor&, TensorEntry* t) { t[0].data_offset += 4; }},
      {"data overlaps table", [](SlotDescriptor&, TensorEntry* t) { t[1].data_offset = 64; }},
      {"shape beyond slot", [](SlotDescriptor&, TensorEntry* t) { t[0].shape[0] = 1u << 20; }},
      {"shape overflows", [](SlotDescriptor&, TensorEntry* t) {
         t[0].shape[0] = 1ull << 40; t[0].shape[1] = 1ull << 40; }},
      {"bad dtype", [](SlotDescriptor&, TensorEntry* t) { t[1].dtype = 0; }},
      {"bad rank", [](SlotDescriptor&, TensorEntry* t) { t[1].ndim = 5; }},
  };
  for (const SlotCase& c : cases) {
    SCOPED_TRACE(c.name);
    MakeRing(4, 1);
    auto reader = Attach(0);
    ASSERT_TRUE(Publish().ok());
    uint8_t* base = writer_->TEST_data();
    const auto& h = *reinterpret_cast<const RingHeader*>(base);
    auto* d = reinterpret_cast<SlotDescriptor*>(base + h.descriptor_offset);
    auto* table = reinterpret_cast<TensorEntry*>(base + h.payload_offset);
    c.corrupt(*d, table);
    auto view = reader->Acquire(kShort);
    EXPECT_EQ(view.status().code(), absl::StatusCode::kDataLoss) << view.status();
  }
}

}  // namespace
}  // namespace zephon::shm

// Multi-process ring behaviour with real fork()ed processes: the writer and readers share
// nothing but the segment (and, here, a pipe standing in for zephond's control plane).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "shm/ring_reader.h"
#include "shm/ring_writer.h"
#include "shm/test_util.h"

namespace zephon::shm {
namespace {

using ::zephon::shm::testing::UniqueShmName;

constexpr uint64_t kWords = 256;  // uint64 words of data per batch

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser: deterministic batch contents
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t Fnv1a(const void* data, size_t bytes) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < bytes; ++i) {
    h = (h ^ static_cast<const uint8_t*>(data)[i]) * 0x100000001B3ull;
  }
  return h;
}

absl::Status PublishChecksummed(RingWriter& writer) {
  absl::StatusOr<SlotWriter> slot = writer.Loan(absl::Seconds(10));
  if (!slot.ok()) return slot.status();
  auto data = slot->AddTensor("data", DType::kUInt64, {kWords});
  auto sum = slot->AddTensor("checksum", DType::kUInt64, {1});
  if (!data.ok() || !sum.ok()) return absl::InternalError("AddTensor");
  auto* words = static_cast<uint64_t*>(*data);
  for (uint64_t i = 0; i < kWords; ++i) words[i] = Mix(slot->seq() * kWords + i);
  *static_cast<uint64_t*>(*sum) = Fnv1a(words, kWords * 8);
  return writer.Publish(*std::move(slot));
}

// Waits for `pid` at most `timeout`, SIGKILLing it if it overstays. Returns the exit
// code, or -signal.
int WaitChild(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1000;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// What the control plane tells a reader process.
struct LeaseMessage {
  char name[96];
  uint32_t index;
  uint32_t epoch;
  uint64_t generation;
};

void SendLease(int fd, const std::string& name, const ReaderLease& lease, uint64_t gen) {
  LeaseMessage m{};
  std::strncpy(m.name, name.c_str(), sizeof(m.name) - 1);
  m.index = lease.index;
  m.epoch = lease.lease_epoch;
  m.generation = gen;
  ASSERT_EQ(write(fd, &m, sizeof(m)), ssize_t(sizeof(m)));
}

bool ReceiveLease(int fd, LeaseMessage* m) {
  return read(fd, m, sizeof(*m)) == ssize_t(sizeof(*m));
}

// Child body: read every batch, verify contents and checksum. Exit codes name the failure.
int ReadAllBatches(int fd, uint64_t batches) {
  LeaseMessage m;
  if (!ReceiveLease(fd, &m)) return 2;
  auto reader = RingReader::Open(m.name, m.index, m.epoch, m.generation, absl::Seconds(5));
  if (!reader.ok()) return 3;
  for (uint64_t seq = 0; seq < batches; ++seq) {
    auto view = (*reader)->Acquire(absl::Seconds(10));
    if (!view.ok() || view->seq != seq) return 4;
    const TensorView* data = view->Find("data");
    const TensorView* sum = view->Find("checksum");
    if (data == nullptr || sum == nullptr || data->bytes != kWords * 8) return 5;
    const auto* words = static_cast<const uint64_t*>(data->data);
    if (Fnv1a(words, data->bytes) != *static_cast<const uint64_t*>(sum->data)) return 6;
    for (uint64_t i = 0; i < kWords; ++i) {
      if (words[i] != Mix(seq * kWords + i)) return 7;
    }
    if (!(*reader)->Release(seq).ok()) return 8;
  }
  auto end = (*reader)->Acquire(absl::Seconds(10));
  return end.status().code() == absl::StatusCode::kOutOfRange ? 0 : 9;
}

TEST(RingMultiprocessTest, ForkedReaderReadsAThousandBatchesWithChecksums) {
  constexpr uint64_t kBatches = 1000;
  auto writer = RingWriter::Create(UniqueShmName("mp"), RingGeometry{8, 4096, 2}, 0600, "mp");
  ASSERT_TRUE(writer.ok()) << writer.status();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(ReadAllBatches(fds[0], kBatches));
  auto lease = (*writer)->AttachReader(0, child, 0, std::nullopt);
  ASSERT_TRUE(lease.ok()) << lease.status();
  SendLease(fds[1], (*writer)->name(), *lease, (*writer)->generation());
  for (uint64_t i = 0; i < kBatches; ++i) {
    ASSERT_TRUE(PublishChecksummed(**writer).ok()) << i;
  }
  ASSERT_TRUE((*writer)->PublishEndOfStream(absl::Seconds(10)).ok());
  EXPECT_EQ(WaitChild(child, absl::Seconds(60)), 0);
  EXPECT_EQ((*writer)->MinGatingConsumed(), kBatches + 1);
  close(fds[0]);
  close(fds[1]);
}

TEST(RingMultiprocessTest, DeadReaderProcessPoisonsItsPeerProcess) {
  auto writer = RingWriter::Create(UniqueShmName("mp"), RingGeometry{4, 4096, 2}, 0600, "mp");
  ASSERT_TRUE(writer.ok()) << writer.status();
  int to_a[2], to_b[2];
  ASSERT_EQ(pipe(to_a), 0);
  ASSERT_EQ(pipe(to_b), 0);
  auto blocked_reader = [](int fd) {
    LeaseMessage m;
    if (!ReceiveLease(fd, &m)) return 2;
    auto reader = RingReader::Open(m.name, m.index, m.epoch, m.generation, absl::Seconds(30));
    if (!reader.ok()) return 3;
    absl::Status s = (*reader)->Acquire(absl::Seconds(20)).status();  // nothing published
    return s.code() == absl::StatusCode::kAborted &&
                   s.message().find("rank 1 lost: exited on signal 9") != absl::string_view::npos
               ? 0
               : 4;
  };
  const pid_t a = fork();
  if (a == 0) _exit(blocked_reader(to_a[0]));
  const pid_t b = fork();
  if (b == 0) _exit(blocked_reader(to_b[0]));
  auto lease_a = (*writer)->AttachReader(1, a, 0, std::nullopt);
  auto lease_b = (*writer)->AttachReader(2, b, 0, std::nullopt);
  ASSERT_TRUE(lease_a.ok() && lease_b.ok());
  SendLease(to_a[1], (*writer)->name(), *lease_a, (*writer)->generation());
  SendLease(to_b[1], (*writer)->name(), *lease_b, (*writer)->generation());
  absl::SleepFor(absl::Milliseconds(300));  // both asleep in Acquire
  kill(a, SIGKILL);
  EXPECT_EQ(WaitChild(a, absl::Seconds(5)), -SIGKILL);
  // zephond would learn this from the broken Attach stream.
  (*writer)->MarkReaderDead(lease_a->index, 1, "exited on signal 9");
  EXPECT_EQ(WaitChild(b, absl::Seconds(5)), 0);
  for (int fd : {to_a[0], to_a[1], to_b[0], to_b[1]}) close(fd);
}

TEST(RingMultiprocessTest, DeadProducerIsSeenWithinTheTimeoutAndLoansStayReadable) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string name = UniqueShmName("producer");
  const pid_t producer = fork();
  ASSERT_GE(producer, 0);
  if (producer == 0) {
    auto writer = RingWriter::Create(name, RingGeometry{4, 4096, 1}, 0600, "mp");
    if (!writer.ok()) _exit(2);
    auto lease = (*writer)->AttachReader(0, getppid(), 0, std::nullopt);
    if (!lease.ok() || !PublishChecksummed(**writer).ok()) _exit(3);
    SendLease(fds[1], name, *lease, (*writer)->generation());
    while (true) {  // a healthy producer heartbeats until it is killed
      (*writer)->Heartbeat();
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  LeaseMessage m;
  ASSERT_TRUE(ReceiveLease(fds[0], &m));
  constexpr absl::Duration kTimeout = absl::Milliseconds(300);
  auto reader = RingReader::Open(m.name, m.index, m.epoch, m.generation, kTimeout);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto view = (*reader)->Acquire(absl::Seconds(5));
  ASSERT_TRUE(view.ok()) << view.status();
  // Alive and heartbeating: an idle wait is a plain deadline.
  EXPECT_EQ((*reader)->Acquire(absl::Milliseconds(400)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  kill(producer, SIGKILL);
  EXPECT_EQ(WaitChild(producer, absl::Seconds(5)), -SIGKILL);
  const absl::Time start = absl::Now();
  absl::Status s = (*reader)->Acquire(absl::Seconds(10)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_LT(absl::Now() - start, kTimeout + absl::Milliseconds(300));
  // The batch already loaned is still intact after the producer's death.
  const TensorView* data = view->Find("data");
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(static_cast<const uint64_t*>(data->data)[5], Mix(5));
  EXPECT_TRUE(Segment::Unlink(name).ok());  // the dead producer could not
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace zephon::shm

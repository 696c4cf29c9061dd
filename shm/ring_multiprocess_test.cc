// Multi-process ring behaviour with real fork()ed processes: the writer and readers share
// nothing but the ring's memfds, passed with SCM_RIGHTS over a socketpair standing in for
// zephond's control plane and hand-off socket.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "shm/fd_passing.h"
#include "shm/ring_reader.h"
#include "shm/ring_writer.h"
#include "shm/test_util.h"

namespace zephon::shm {
namespace {

using ::zephon::shm::testing::FdsOf;
using ::zephon::shm::testing::UniqueRingName;
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

// A SOCK_SEQPACKET socketpair: the only channel between the test's processes.
void Channel(int fds[2]) { ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds), 0); }

// Sends the lease and the ring's reader fds (data read-only, cursors) with SCM_RIGHTS.
void SendLease(int fd, const RingWriter& writer, const ReaderLease& lease) {
  LeaseMessage m{};
  std::strncpy(m.name, writer.name().c_str(), sizeof(m.name) - 1);
  m.index = lease.index;
  m.epoch = lease.lease_epoch;
  m.generation = writer.generation();
  RingFds fds = FdsOf(writer);
  const int passed[] = {fds.data.get(), fds.cursors.get()};
  absl::Status s = SendWithFds(fd, std::string_view(reinterpret_cast<const char*>(&m), sizeof(m)),
                               passed, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(s.ok()) << s;
}

bool ReceiveLease(int fd, LeaseMessage* m, RingFds* fds) {
  auto got = ReceiveWithFds(fd, sizeof(*m), 2, absl::Now() + absl::Seconds(30));
  if (!got.ok() || got->bytes.size() != sizeof(*m) || got->fds.size() != 2) return false;
  std::memcpy(m, got->bytes.data(), sizeof(*m));
  fds->data = std::move(got->fds[0]);
  fds->cursors = std::move(got->fds[1]);
  return true;
}

absl::StatusOr<std::unique_ptr<RingReader>> OpenLease(int fd, absl::Duration timeout) {
  LeaseMessage m;
  RingFds fds;
  if (!ReceiveLease(fd, &m, &fds)) return absl::UnavailableError("no lease");
  return RingReader::Open(std::move(fds), m.name, m.index, m.epoch, m.generation, timeout);
}

// Child body: read every batch, verify contents and checksum. Exit codes name the failure.
int ReadAllBatches(int fd, uint64_t batches) {
  auto reader = OpenLease(fd, absl::Seconds(5));
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
  auto writer = RingWriter::Create(UniqueRingName("mp"), RingGeometry{8, 4096, 2}, "mp");
  ASSERT_TRUE(writer.ok()) << writer.status();
  int fds[2];
  Channel(fds);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(ReadAllBatches(fds[0], kBatches));
  auto lease = (*writer)->AttachReader(0, child, 0, std::nullopt);
  ASSERT_TRUE(lease.ok()) << lease.status();
  SendLease(fds[1], **writer, *lease);
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
  auto writer = RingWriter::Create(UniqueRingName("mp"), RingGeometry{4, 4096, 2}, "mp");
  ASSERT_TRUE(writer.ok()) << writer.status();
  int to_a[2], to_b[2];
  Channel(to_a);
  Channel(to_b);
  auto blocked_reader = [](int fd) {
    auto reader = OpenLease(fd, absl::Seconds(30));
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
  SendLease(to_a[1], **writer, *lease_a);
  SendLease(to_b[1], **writer, *lease_b);
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
  Channel(fds);
  const std::string name = UniqueRingName("producer");
  const pid_t producer = fork();
  ASSERT_GE(producer, 0);
  if (producer == 0) {
    auto writer = RingWriter::Create(name, RingGeometry{4, 4096, 1}, "mp");
    if (!writer.ok()) _exit(2);
    auto lease = (*writer)->AttachReader(0, getppid(), 0, std::nullopt);
    if (!lease.ok() || !PublishChecksummed(**writer).ok()) _exit(3);
    SendLease(fds[1], **writer, *lease);
    while (true) {  // a healthy producer heartbeats until it is killed
      (*writer)->Heartbeat();
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  constexpr absl::Duration kTimeout = absl::Milliseconds(300);
  auto reader = OpenLease(fds[0], kTimeout);
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
  close(fds[0]);
  close(fds[1]);
}

// Issue 12: a reader process (in --shm-group, so it had a writable fd) ran ftruncate(4096)
// on a live ring and zephond died of SIGBUS with every reader. A hostile process holding
// exactly what a reader gets now fails at every attempt to resize or write the batch area,
// and the producer and an honest reader carry on.
int HostileReader(int fd) {
  LeaseMessage m;
  RingFds fds;
  if (!ReceiveLease(fd, &m, &fds)) return 2;
  // Shrink or grow either segment: sealed (EPERM), or not writable at all (EINVAL/EBADF).
  if (ftruncate(fds.data.get(), 4096) == 0 || ftruncate(fds.data.get(), 0) == 0) return 3;
  if (ftruncate(fds.cursors.get(), 4096) == 0 || errno != EPERM) return 4;
  if (ftruncate(fds.cursors.get(), 1 << 30) == 0 || errno != EPERM) return 5;
  if (fallocate(fds.data.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0) {
    return 6;
  }
  // Map the batch area writable: refused, directly or by upgrading a read-only mapping.
  if (mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds.data.get(), 0) != MAP_FAILED) {
    return 7;
  }
  void* ro = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fds.data.get(), 0);
  if (ro == MAP_FAILED || mprotect(ro, 4096, PROT_READ | PROT_WRITE) == 0) return 8;
  // Reopen the fd read-write through /proc (possible for the daemon's own uid): the
  // future-write seal still forbids writable mappings, writes and resizes.
  const std::string path = "/proc/self/fd/" + std::to_string(fds.data.get());
  const int rw = open(path.c_str(), O_RDWR);
  if (rw >= 0) {
    if (mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0) != MAP_FAILED) return 9;
    if (write(rw, "x", 1) >= 0 || ftruncate(rw, 4096) == 0) return 10;
    close(rw);
  }
  // Scribbling over the cursor segment's wake line (the only writable part besides its
  // own record) wakes the producer for nothing, but must not crash anyone.
  void* cursors = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds.cursors.get(), 0);
  if (cursors == MAP_FAILED) return 11;
  std::memset(static_cast<char*>(cursors) + 128, 0xA5, 4096 - 128);
  return 0;
}

TEST(RingMultiprocessTest, HostileReaderCannotShrinkOrWriteTheRing) {
  constexpr uint64_t kBatches = 200;
  int hostile_channel[2], honest_channel[2];
  Channel(hostile_channel);
  Channel(honest_channel);
  // Fork before the ring exists: the children hold only what they are sent.
  const pid_t hostile = fork();
  ASSERT_GE(hostile, 0);
  if (hostile == 0) _exit(HostileReader(hostile_channel[0]));
  const pid_t honest = fork();
  ASSERT_GE(honest, 0);
  if (honest == 0) _exit(ReadAllBatches(honest_channel[0], kBatches));
  auto writer = RingWriter::Create(UniqueRingName("hostile"), RingGeometry{8, 4096, 2}, "mp");
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto hostile_lease = (*writer)->AttachReader(1, hostile, 0, std::nullopt);
  auto honest_lease = (*writer)->AttachReader(0, honest, 0, std::nullopt);
  ASSERT_TRUE(hostile_lease.ok() && honest_lease.ok());
  SendLease(hostile_channel[1], **writer, *hostile_lease);
  SendLease(honest_channel[1], **writer, *honest_lease);
  EXPECT_EQ(WaitChild(hostile, absl::Seconds(30)), 0);
  // zephond detaches a reader whose stream ends; the producer must survive every touch.
  (*writer)->DetachReader(hostile_lease->index);
  for (uint64_t i = 0; i < kBatches; ++i) {
    ASSERT_TRUE(PublishChecksummed(**writer).ok()) << i;
  }
  ASSERT_TRUE((*writer)->PublishEndOfStream(absl::Seconds(10)).ok());
  EXPECT_EQ(WaitChild(honest, absl::Seconds(60)), 0);
  for (int fd : {hostile_channel[0], hostile_channel[1], honest_channel[0], honest_channel[1]}) {
    close(fd);
  }
}

}  // namespace
}  // namespace zephon::shm

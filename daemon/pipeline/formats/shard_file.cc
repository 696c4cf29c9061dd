#include "daemon/pipeline/formats/shard_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zephon::pipeline {
namespace {

absl::Status CheckRange(const ShardFile& file, uint64_t offset, uint64_t n) {
  if (offset > file.size() || n > file.size() - offset) {
    return absl::OutOfRangeError(absl::StrCat("read of bytes [", offset, ", ", offset + n,
                                              ") passes the end of ", file.path(), " (",
                                              file.size(), " bytes)"));
  }
  return absl::OkStatus();
}

// A file whose bytes are one contiguous resident range.
class ResidentFile : public ShardFile {
 public:
  absl::Status ReadAt(uint64_t offset, uint64_t n, char* out) const override {
    RETURN_IF_ERROR(CheckRange(*this, offset, n));
    if (n > 0) std::memcpy(out, data() + offset, n);
    return absl::OkStatus();
  }
};

// Per thread: the block of one LocalFile read ahead for sequential readers.
struct ReadAhead {
  uint64_t file_id = 0;          // LocalFile::id_ of the last read on this thread; 0: none
  uint64_t next = 0;             // where that read ended (a sequential read starts here)
  uint64_t start = 0;            // file offset of bytes[0]
  std::string bytes;             // file bytes [start, start + bytes.size())
  uint32_t streak = 0;           // exact reads in a row that each began where the last ended
};

ReadAhead& ThisThreadReadAhead() {
  thread_local ReadAhead read_ahead;
  return read_ahead;
}

// Owns one descriptor opened for reading. Copying would double-close, so it is deleted.
// Sequential readers (each sample piece starting where the thread's previous read of the
// file ended: unshuffled Megatron and flat shards) are served from a per-thread block of
// kReadAheadBytes read with one pread, so they pay about one system call per block
// instead of one per piece; other reads are one exact pread each. A block is read from
// the second sequential read in a row on: a shuffled reader's one continuation (the
// rest of a document that a packed row split) is no reason to read 256 KiB, and doing
// so cost a shuffled first batch 2 ms.
class LocalFile final : public ShardFile {
 public:
  LocalFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size), id_(NextId()) {}
  LocalFile(const LocalFile&) = delete;
  LocalFile& operator=(const LocalFile&) = delete;
  ~LocalFile() override { close(fd_); }
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return size_; }

  absl::Status ReadAt(uint64_t offset, uint64_t n, char* out) const override {
    RETURN_IF_ERROR(CheckRange(*this, offset, n));
    ReadAhead& ra = ThisThreadReadAhead();
    const bool mine = ra.file_id == id_;
    if (mine && offset >= ra.start && offset + n <= ra.start + ra.bytes.size()) {
      if (n > 0) std::memcpy(out, ra.bytes.data() + (offset - ra.start), n);
      ra.next = offset + n;
      return absl::OkStatus();
    }
    const bool sequential = mine && offset == ra.next;
    if (sequential && ra.streak >= 1 && n <= kReadAheadBytes / 2) {
      const uint64_t block = std::min(kReadAheadBytes, size_ - offset);
      ra.bytes.resize(block);
      if (PreadFully(offset, block, ra.bytes.data()).ok()) {
        ra.start = offset;
        if (n > 0) std::memcpy(out, ra.bytes.data(), n);
        ra.next = offset + n;
        return absl::OkStatus();
      }
      // The block failed (say the file shrank inside it): the exact read below decides
      // whether these n bytes are still there, and reports precisely if not.
    }
    ra.file_id = 0;  // forget the block: a failed or foreign read leaves nothing cached
    ra.bytes.clear();
    RETURN_IF_ERROR(PreadFully(offset, n, out));
    ra.file_id = id_;
    ra.start = offset;
    ra.next = offset + n;
    ra.streak = sequential ? ra.streak + 1 : 0;
    return absl::OkStatus();
  }

 private:
  // pread moves at most about 2 GiB per call on Linux; larger reads loop.
  static constexpr uint64_t kMaxPreadBytes = uint64_t{1} << 30;
  // Read-ahead block of sequential readers: 64 pieces of 2,049 uint16 tokens.
  static constexpr uint64_t kReadAheadBytes = uint64_t{256} << 10;

  // Process-unique, never reused: a thread's ReadAhead can never match a newer file
  // allocated at a dead one's address.
  static uint64_t NextId() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }

  absl::Status PreadFully(uint64_t offset, uint64_t n, char* out) const {
    uint64_t done = 0;
    while (done < n) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(n - done, kMaxPreadBytes));
      const ssize_t got = pread(fd_, out + done, want, static_cast<off_t>(offset + done));
      if (got > 0) {
        done += static_cast<uint64_t>(got);
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got == 0) return Shrunk(offset, n, offset + done);
      const int err = errno;
      return absl::InternalError(absl::StrCat("cannot read ", path_, " at byte offset ",
                                              offset + done, ": ", strerror(err)));
    }
    return absl::OkStatus();
  }

  // The read of [offset, offset + n) found the file ending at `end` < size_: another
  // process shrank (truncated or rewrote in place) the file since it was opened.
  absl::Status Shrunk(uint64_t offset, uint64_t n, uint64_t end) const {
    struct stat st;
    const std::string now =
        fstat(fd_, &st) == 0 ? absl::StrCat(st.st_size, " bytes now") : "size unknown now";
    return absl::DataLossError(absl::StrCat(
        path_, " was truncated while in use: reading bytes [", offset, ", ", offset + n,
        ") found it ending before byte offset ", end, " (",
        size_, " bytes when opened, ", now,
        "); another process shrank or rewrote it in place. Restart the run once the "
        "file is complete again, and replace dataset files by rename, not in place"));
  }

  const std::string path_;
  const int fd_;
  const uint64_t size_;
  const uint64_t id_;
};

class MemoryFile final : public ResidentFile {
 public:
  MemoryFile(std::string path, std::string bytes)
      : path_(std::move(path)), bytes_(std::move(bytes)) {}
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return bytes_.size(); }
  const char* data() const override { return bytes_.data(); }

 private:
  const std::string path_;
  const std::string bytes_;
};

}  // namespace

absl::StatusOr<std::string_view> ShardFile::View(uint64_t offset, uint64_t n,
                                                 std::string* scratch) const {
  RETURN_IF_ERROR(CheckRange(*this, offset, n));  // before sizing any buffer by `n`
  if (const char* d = data(); d != nullptr) return std::string_view(d + offset, n);
  scratch->resize(n);
  RETURN_IF_ERROR(ReadAt(offset, n, scratch->data()));
  return std::string_view(*scratch);
}

absl::StatusOr<std::unique_ptr<ShardFile>> OpenLocalShardFile(const std::string& path) {
  // O_NONBLOCK: a FIFO planted in a dataset directory fails the regular-file check below
  // instead of blocking the open forever (it does not affect reads of regular files).
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    std::string msg = absl::StrCat("cannot open shard file ", path, ": ", strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("shard file ", path, " is not a regular file"));
  }
  return std::unique_ptr<ShardFile>(
      new LocalFile(path, fd, static_cast<uint64_t>(st.st_size)));
}

std::unique_ptr<ShardFile> MemoryShardFile(std::string path, std::string bytes) {
  return std::make_unique<MemoryFile>(std::move(path), std::move(bytes));
}

absl::StatusOr<std::unique_ptr<ShardFile>> MakeResident(std::unique_ptr<ShardFile> file) {
  if (file->data() != nullptr) return file;
  std::string bytes(file->size(), '\0');
  RETURN_IF_ERROR(file->ReadAt(0, bytes.size(), bytes.data()));
  return MemoryShardFile(file->path(), std::move(bytes));
}

}  // namespace zephon::pipeline

#include "daemon/pipeline/shard_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

// Owns one read-only mapping; copying would double-unmap, so it is deleted.
class MappedFile final : public ResidentFile {
 public:
  MappedFile(std::string path, const char* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() override {
    if (size_ > 0) munmap(const_cast<char*>(data_), size_);
  }
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return size_; }
  const char* data() const override { return data_; }

 private:
  const std::string path_;
  const char* const data_;
  const size_t size_;
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

absl::StatusOr<std::unique_ptr<ShardFile>> MapShardFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
  const size_t size = static_cast<size_t>(st.st_size);
  const char* data = "";
  if (size > 0) {
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      close(fd);
      return absl::InternalError(absl::StrCat("mmap of ", path, " failed: ", strerror(err)));
    }
    data = static_cast<const char*>(p);
  }
  close(fd);  // The mapping keeps the file alive.
  return std::unique_ptr<ShardFile>(new MappedFile(path, data, size));
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

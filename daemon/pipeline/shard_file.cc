#include "daemon/pipeline/shard_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace zephon::pipeline {
namespace {

// Owns one read-only mapping; copying would double-unmap, so it is deleted.
class MappedFile final : public ShardFile {
 public:
  MappedFile(std::string path, const char* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() override {
    if (size_ > 0) munmap(const_cast<char*>(data_), size_);
  }
  const std::string& path() const override { return path_; }
  std::string_view bytes() const override { return std::string_view(data_, size_); }

 private:
  const std::string path_;
  const char* const data_;
  const size_t size_;
};

}  // namespace

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

}  // namespace zephon::pipeline

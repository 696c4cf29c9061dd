#include "daemon/storage/shard_cache_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include <zlib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "common/status_macros.h"

namespace zephon::storage {
namespace {

constexpr char kMagic[8] = {'Z', 'S', 'C', 'A', 'C', 'H', 'E', '1'};

void PutU32(uint32_t v, char* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void PutU64(uint64_t v, char* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string ErrnoText() { return std::strerror(errno); }

absl::Status WriteAll(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t done = write(fd, data, n);
    if (done < 0 && errno == EINTR) continue;
    if (done < 0) {
      const int err = errno;
      std::string msg = absl::StrCat("cannot write ", path, ": ", std::strerror(err));
      return err == ENOSPC ? absl::ResourceExhaustedError(msg) : absl::InternalError(msg);
    }
    data += done;
    n -= static_cast<size_t>(done);
  }
  return absl::OkStatus();
}

bool ReadAll(int fd, char* data, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t got = pread(fd, data, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    data += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

}  // namespace

std::string EntryFileName(const std::string& identity) {
  return absl::StrCat(Sha256Hex(identity).substr(0, 32), kEntryFileSuffix);
}

uint64_t EntryHeaderBytes(const std::string& identity) {
  return kEntryFixedHeaderBytes + identity.size();
}

uint32_t EntryCrc32(const char* data, uint64_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const uInt take = static_cast<uInt>(std::min<uint64_t>(n, uint64_t{1} << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), take);
    data += take;
    n -= take;
  }
  return static_cast<uint32_t>(crc);
}

std::string EncodeEntryHeader(const std::string& identity, absl::string_view payload) {
  std::string header(kEntryFixedHeaderBytes, '\0');
  std::memcpy(header.data(), kMagic, 8);
  PutU64(payload.size(), header.data() + 8);
  PutU32(EntryCrc32(payload.data(), payload.size()), header.data() + 16);
  PutU32(static_cast<uint32_t>(identity.size()), header.data() + 20);
  header += identity;
  return header;
}

absl::Status EnsureEntryDir(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(dir, " exists and is not a directory"));
  }
  const size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    RETURN_IF_ERROR(EnsureEntryDir(dir.substr(0, slash)));
  }
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir, ": ", ErrnoText()));
  }
  return absl::OkStatus();
}

absl::Status WriteEntryFile(const std::string& path, const std::string& identity,
                            absl::string_view payload) {
  static std::atomic<uint64_t> counter{0};
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string temp = absl::StrCat(dir, "/", kEntryTempPrefix, name, ".", getpid(), ".",
                                        counter.fetch_add(1));
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", temp, ": ", ErrnoText()));
  }
  const std::string header = EncodeEntryHeader(identity, payload);
  absl::Status s = WriteAll(fd, header.data(), header.size(), temp);
  if (s.ok()) s = WriteAll(fd, payload.data(), payload.size(), temp);
  if (close(fd) != 0 && s.ok()) {
    s = absl::InternalError(absl::StrCat("cannot close ", temp, ": ", ErrnoText()));
  }
  if (s.ok() && rename(temp.c_str(), path.c_str()) != 0) {
    s = absl::InternalError(absl::StrCat("cannot rename ", temp, ": ", ErrnoText()));
  }
  if (!s.ok()) unlink(temp.c_str());
  return s;
}

bool ReadEntryHeader(const std::string& path, EntryFileHeader* out) {
  // O_NONBLOCK: a FIFO named like an entry must not hang the scan (it fails S_ISREG).
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st;
  char fixed[kEntryFixedHeaderBytes];
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            ReadAll(fd, fixed, sizeof(fixed), 0) && std::memcmp(fixed, kMagic, 8) == 0;
  if (ok) {
    out->payload_bytes = GetU64(fixed + 8);
    out->crc = GetU32(fixed + 16);
    const uint32_t identity_bytes = GetU32(fixed + 20);
    out->file_bytes = static_cast<uint64_t>(st.st_size);
    out->mtime = absl::TimeFromTimespec(st.st_mtim);
    ok = identity_bytes <= kMaxEntryIdentityBytes &&
         out->file_bytes == kEntryFixedHeaderBytes + identity_bytes + out->payload_bytes;
    if (ok) {
      out->identity.resize(identity_bytes);
      ok = ReadAll(fd, out->identity.data(), identity_bytes, kEntryFixedHeaderBytes);
    }
  }
  close(fd);
  return ok;
}

uint64_t ScanEntryDir(const std::string& dir, std::vector<ScannedEntryFile>* found) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  uint64_t rejected = 0;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    const std::string path = absl::StrCat(dir, "/", name);
    if (absl::StartsWith(name, kEntryTempPrefix)) {  // a write that never finished
      unlink(path.c_str());
      ++rejected;
      continue;
    }
    if (!absl::EndsWith(name, kEntryFileSuffix)) continue;
    ScannedEntryFile file;
    if (!ReadEntryHeader(path, &file.header) || name != EntryFileName(file.header.identity)) {
      unlink(path.c_str());
      ++rejected;
      continue;
    }
    file.path = path;
    found->push_back(std::move(file));
  }
  closedir(d);
  std::sort(found->begin(), found->end(), [](const ScannedEntryFile& a, const ScannedEntryFile& b) {
    return a.header.mtime < b.header.mtime;
  });
  return rejected;
}

EntryFileMap::EntryFileMap(EntryFileMap&& other) noexcept
    : addr_(std::exchange(other.addr_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      header_bytes_(std::exchange(other.header_bytes_, 0)) {}

EntryFileMap& EntryFileMap::operator=(EntryFileMap&& other) noexcept {
  if (this != &other) {
    Reset();
    addr_ = std::exchange(other.addr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    header_bytes_ = std::exchange(other.header_bytes_, 0);
  }
  return *this;
}

void EntryFileMap::Reset() {
  if (addr_ != nullptr) munmap(addr_, bytes_);
  addr_ = nullptr;
  bytes_ = 0;
  header_bytes_ = 0;
}

absl::StatusOr<EntryFileMap> MapEntryFile(const std::string& path, const std::string& identity,
                                          uint64_t payload_bytes,
                                          std::optional<uint32_t> expect_crc) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", path, ": ", ErrnoText()));
  const uint64_t header_bytes = EntryHeaderBytes(identity);
  const uint64_t expect = header_bytes + payload_bytes;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const std::string why = ErrnoText();
    close(fd);
    return absl::InternalError(absl::StrCat("cannot stat ", path, ": ", why));
  }
  if (static_cast<uint64_t>(st.st_size) != expect) {
    close(fd);
    return absl::DataLossError(absl::StrCat(path, " has ", st.st_size, " bytes, expected ",
                                            expect, " (torn or short)"));
  }
  void* p = mmap(nullptr, expect, PROT_READ, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  close(fd);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map ", path, ": ", std::strerror(map_errno)));
  }
  EntryFileMap map;
  map.addr_ = p;
  map.bytes_ = expect;
  map.header_bytes_ = header_bytes;
  if (expect_crc.has_value() && EntryCrc32(map.payload(), payload_bytes) != *expect_crc) {
    return absl::DataLossError(absl::StrCat(path, ": the payload fails its CRC-32 check"));
  }
  return map;
}

}  // namespace zephon::storage

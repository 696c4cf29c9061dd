#include "daemon/pipeline/formats/token_cache_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/mix.h"
#include "common/status_macros.h"

namespace zephon::pipeline {
namespace fs = std::filesystem;
namespace {

constexpr size_t kWriteChunkBytes = 1 << 20;

// A cache pair is usable if .off holds N + 1 non-decreasing offsets starting at 0 and
// ending at the .tok token count.
// Whether `off` holds u64 LE offsets from 0, non-decreasing, ending at `end`.
bool OffsetsConsistent(const ShardFile& off, uint64_t end) {
  const std::string_view o(off.data(), off.size());
  if (o.size() < 8 || o.size() % 8 != 0) return false;
  uint64_t prev = 0;
  for (size_t i = 0; i < o.size(); i += 8) {
    const uint64_t v = LoadU64(o.data() + i);
    if ((i == 0 && v != 0) || v < prev) return false;
    prev = v;
  }
  return prev == end;
}

bool CacheConsistent(const ShardFile& tok, const ShardFile& off) {
  return tok.size() % 4 == 0 && OffsetsConsistent(off, tok.size() / 4);
}

}  // namespace

absl::StatusOr<SourceStat> StatSource(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    std::string msg = absl::StrCat("cannot stat ", path, ": ", strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  return SourceStat{static_cast<uint64_t>(st.st_size),
                    static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ULL +
                        static_cast<uint64_t>(st.st_mtim.tv_nsec)};
}

void AppendU64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t LoadU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string LocalSourceIdentity(const std::string& abs_path, const SourceStat& st) {
  std::string bytes = abs_path;
  bytes.push_back('\0');
  AppendU64(st.size, &bytes);
  AppendU64(st.mtime_ns, &bytes);
  return bytes;
}

std::string RemoteSourceIdentity(const std::string& url, uint64_t size,
                                 const std::string& version) {
  std::string bytes("remote");
  bytes.push_back('\0');
  bytes += url;
  bytes.push_back('\0');
  AppendU64(size, &bytes);
  bytes += version;
  bytes.push_back('\0');
  return bytes;
}

std::string CacheKey(std::string_view domain, std::string_view identity, std::string_view rest) {
  std::string bytes(domain);
  bytes.push_back('\0');
  bytes += identity;
  bytes += rest;
  return absl::StrFormat("%016x", HashBytes(bytes));
}

absl::Status EnsureDir(const std::string& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return absl::OkStatus();
  const fs::path parent = fs::path(dir).parent_path();
  if (!parent.empty() && parent != fs::path(dir)) RETURN_IF_ERROR(EnsureDir(parent.string()));
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create cache directory ", dir, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

TempFile::TempFile(std::string final_path) : final_(std::move(final_path)) {
  const uint64_t salt = Combine(static_cast<uint64_t>(getpid()),
                                std::chrono::steady_clock::now().time_since_epoch().count());
  // The address tells apart two converters of one process started in the same tick.
  temp_ = absl::StrFormat("%s.tmp.%d.%016x", final_, getpid(),
                          Combine(salt, reinterpret_cast<uintptr_t>(this)));
}

TempFile::~TempFile() {
  if (fd_ >= 0) close(fd_);
  if (!committed_) unlink(temp_.c_str());
}

absl::Status TempFile::Create() {
  // O_EXCL never follows a planted symlink; O_NOFOLLOW says so for readers too.
  fd_ = open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) return Error("cannot create");
  return absl::OkStatus();
}

absl::Status TempFile::Write(std::string* buffer, bool force) {
  if (buffer->size() < kWriteChunkBytes && !force) return absl::OkStatus();
  size_t done = 0;
  while (done < buffer->size()) {
    const ssize_t n = write(fd_, buffer->data() + done, buffer->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error("cannot write");
    done += static_cast<size_t>(n);
  }
  buffer->clear();
  return absl::OkStatus();
}

absl::Status TempFile::Commit() {
  if (fsync(fd_) != 0) return Error("cannot fsync");
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) return Error("cannot close");
  if (rename(temp_.c_str(), final_.c_str()) != 0) return Error("cannot rename into place");
  committed_ = true;
  return absl::OkStatus();
}

absl::Status TempFile::Error(const char* what) const {
  return absl::InternalError(
      absl::StrCat(what, " token cache file ", temp_, ": ", strerror(errno)));
}

CacheWriter::CacheWriter(const std::string& prefix, bool with_mask, bool with_payload)
    : prefix_(prefix),
      tok_(prefix + ".tok"),
      off_(prefix + ".off"),
      msk_(with_mask ? std::make_unique<TempFile>(prefix + ".msk") : nullptr),
      pay_(with_payload ? std::make_unique<TempFile>(prefix + ".pay") : nullptr),
      pao_(with_payload ? std::make_unique<TempFile>(prefix + ".pao") : nullptr) {}

absl::Status CacheWriter::Create() {
  RETURN_IF_ERROR(tok_.Create());
  RETURN_IF_ERROR(off_.Create());
  if (msk_ != nullptr) RETURN_IF_ERROR(msk_->Create());
  if (pay_ != nullptr) {
    RETURN_IF_ERROR(pay_->Create());
    RETURN_IF_ERROR(pao_->Create());
    AppendU64(0, &pao_buf_);
  }
  AppendU64(0, &off_buf_);
  return absl::OkStatus();
}

absl::Status CacheWriter::Add(const int32_t* ids, size_t n, const uint8_t* mask,
                              std::string_view payload) {
  if (pay_ != nullptr) {
    pay_buf_.append(payload);
    payload_total_ += payload.size();
    AppendU64(payload_total_, &pao_buf_);
    RETURN_IF_ERROR(pay_->Write(&pay_buf_, false));
    RETURN_IF_ERROR(pao_->Write(&pao_buf_, false));
  }
  if (msk_ != nullptr) {
    if (mask == nullptr) {
      msk_buf_.append(n, '\1');
    } else {
      msk_buf_.append(reinterpret_cast<const char*>(mask), n);
    }
    RETURN_IF_ERROR(msk_->Write(&msk_buf_, false));
  }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // The file is little-endian int32: on such a host the ids are its bytes already.
  tok_buf_.append(reinterpret_cast<const char*>(ids), n * sizeof(int32_t));
#else
  for (size_t k = 0; k < n; ++k) {
    const int32_t t = ids[k];
    for (int i = 0; i < 4; ++i) tok_buf_.push_back(static_cast<char>(t >> (8 * i)));
  }
#endif
  total_ += n;
  AppendU64(total_, &off_buf_);
  RETURN_IF_ERROR(tok_.Write(&tok_buf_, false));
  return off_.Write(&off_buf_, false);
}

absl::Status CacheWriter::Commit(
    const std::vector<std::pair<std::string, std::string>>& extra) {
  RETURN_IF_ERROR(tok_.Write(&tok_buf_, true));
  RETURN_IF_ERROR(off_.Write(&off_buf_, true));
  RETURN_IF_ERROR(tok_.Commit());
  if (msk_ != nullptr) {
    RETURN_IF_ERROR(msk_->Write(&msk_buf_, true));
    RETURN_IF_ERROR(msk_->Commit());
  }
  if (pay_ != nullptr) {
    RETURN_IF_ERROR(pay_->Write(&pay_buf_, true));
    RETURN_IF_ERROR(pay_->Commit());
    RETURN_IF_ERROR(pao_->Write(&pao_buf_, true));
    RETURN_IF_ERROR(pao_->Commit());
  }
  for (const auto& [suffix, bytes] : extra) {
    TempFile file(prefix_ + suffix);
    RETURN_IF_ERROR(file.Create());
    std::string buffer = bytes;
    RETURN_IF_ERROR(file.Write(&buffer, true));
    RETURN_IF_ERROR(file.Commit());
  }
  return off_.Commit();
}

// The offsets are read into memory (8 bytes a sample); the tokens are read with pread
// per sample, so a cache file shrunk under the daemon is a DATA_LOSS error naming it,
// not a SIGBUS.
CachePair TryOpenCache(const std::string& prefix, bool with_mask, bool with_payload) {
  CachePair pair;
  auto off_file = OpenLocalShardFile(prefix + ".off");
  auto tok = OpenLocalShardFile(prefix + ".tok");
  if (!off_file.ok() || !tok.ok()) return pair;
  auto off = MakeResident(*std::move(off_file));
  if (!off.ok() || !CacheConsistent(**tok, **off)) return pair;
  if (with_mask) {
    // Read per sample with pread, as .tok: one byte per token.
    auto msk = OpenLocalShardFile(prefix + ".msk");
    if (!msk.ok() || (*msk)->size() != (*tok)->size() / 4) return pair;
    pair.msk = *std::move(msk);
  }
  if (with_payload) {
    // .pao resident (8 bytes a sample, as .off); .pay read with pread per sample.
    auto pay = OpenLocalShardFile(prefix + ".pay");
    auto pao_file = OpenLocalShardFile(prefix + ".pao");
    if (!pay.ok() || !pao_file.ok()) return pair;
    auto pao = MakeResident(*std::move(pao_file));
    if (!pao.ok() || (*pao)->size() != (*off)->size() ||
        !OffsetsConsistent(**pao, (*pay)->size())) {
      return pair;
    }
    pair.pay = *std::move(pay);
    pair.pao = *std::move(pao);
  }
  pair.tok = *std::move(tok);
  pair.off = *std::move(off);
  return pair;
}

ConversionFlights& ConversionFlights::Global() {
  static ConversionFlights* const flights = new ConversionFlights();
  return *flights;
}

ConversionFlights::Hold::Hold(ConversionFlights* flights, std::string key)
    : flights_(flights), key_(std::move(key)) {
  absl::MutexLock lock(&flights_->mu_);
  while (flights_->held_.count(key_) != 0) flights_->released_.Wait(&flights_->mu_);
  flights_->held_.insert(key_);
}

ConversionFlights::Hold::~Hold() {
  absl::MutexLock lock(&flights_->mu_);
  flights_->held_.erase(key_);
  flights_->released_.SignalAll();
}

}  // namespace zephon::pipeline

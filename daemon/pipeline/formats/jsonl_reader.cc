#include "daemon/pipeline/formats/jsonl_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/mix.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/json_scan.h"
#include "daemon/pipeline/formats/line_reader.h"
#include "daemon/pipeline/formats/tokens.h"

namespace zephon::pipeline {
namespace fs = std::filesystem;
namespace {

bool HasSuffix(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

constexpr size_t kWriteChunkBytes = 1 << 20;

struct SourceStat {
  uint64_t size = 0;
  uint64_t mtime_ns = 0;
  friend bool operator==(const SourceStat& a, const SourceStat& b) {
    return a.size == b.size && a.mtime_ns == b.mtime_ns;
  }
};

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

// The key of an object-store source: its URL, size and version stand for the path,
// size and mtime of a local one.
std::string RemoteCacheKey(const std::string& url, uint64_t size, const std::string& version,
                           const std::string& field) {
  std::string bytes("zephon-jsonl-cache-v1");
  bytes.push_back('\0');
  bytes += "remote";
  bytes.push_back('\0');
  bytes += url;
  bytes.push_back('\0');
  AppendU64(size, &bytes);
  bytes += version;
  bytes.push_back('\0');
  bytes += field;
  return absl::StrFormat("%016x", HashBytes(bytes));
}

std::string CacheKey(const std::string& abs_path, const SourceStat& st,
                     const std::string& field) {
  std::string bytes("zephon-jsonl-cache-v1");
  bytes.push_back('\0');
  bytes += abs_path;
  bytes.push_back('\0');
  AppendU64(st.size, &bytes);
  AppendU64(st.mtime_ns, &bytes);
  bytes += field;
  return absl::StrFormat("%016x", HashBytes(bytes));
}

// mkdir -p with mode 0700 for every directory it creates.
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

// A temporary file that is unlinked on destruction unless Commit()ed by renaming.
class TempFile {
 public:
  explicit TempFile(std::string final_path) : final_(std::move(final_path)) {
    const uint64_t salt = Combine(static_cast<uint64_t>(getpid()),
                                  std::chrono::steady_clock::now().time_since_epoch().count());
    temp_ = absl::StrFormat("%s.tmp.%d.%016x", final_, getpid(), salt);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) close(fd_);
    if (!committed_) unlink(temp_.c_str());
  }

  absl::Status Create() {
    // O_EXCL never follows a planted symlink; O_NOFOLLOW says so for readers too.
    fd_ = open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0) return Error("cannot create");
    return absl::OkStatus();
  }
  // Appends bytes; flushes the buffer every kWriteChunkBytes.
  absl::Status Write(std::string* buffer, bool force) {
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
  // fsyncs, closes and renames onto the final path.
  absl::Status Commit() {
    if (fsync(fd_) != 0) return Error("cannot fsync");
    const int fd = fd_;
    fd_ = -1;
    if (close(fd) != 0) return Error("cannot close");
    if (rename(temp_.c_str(), final_.c_str()) != 0) return Error("cannot rename into place");
    committed_ = true;
    return absl::OkStatus();
  }

 private:
  absl::Status Error(const char* what) const {
    return absl::InternalError(
        absl::StrCat(what, " token cache file ", temp_, ": ", strerror(errno)));
  }

  const std::string final_;
  std::string temp_;
  int fd_ = -1;
  bool committed_ = false;
};

bool IsBlank(std::string_view line) {
  for (char c : line) {
    if (c != ' ' && c != '\t' && c != '\r') return false;
  }
  return true;
}

// Converts the lines of `path` into <prefix>.tok / <prefix>.off (see the header for
// the layout); `unchanged` (may be empty) says whether the source is still the one the
// key was computed from.
absl::Status BuildCache(LineReader* lines, const std::string& path, const std::string& field,
                        const std::string& prefix,
                        const std::function<absl::Status()>& unchanged) {
  TempFile tok(prefix + ".tok"), off(prefix + ".off");
  RETURN_IF_ERROR(tok.Create());
  RETURN_IF_ERROR(off.Create());
  std::string tok_buf, off_buf;
  AppendU64(0, &off_buf);
  uint64_t total = 0;
  static_assert(kLineReadAheadBytes >= kJsonPaddingBytes, "lines are scanned in place");
  TokenArrayScanner scanner(field);
  std::vector<int32_t> tokens;
  std::string_view line;
  while (true) {
    ASSIGN_OR_RETURN(bool more, lines->Next(&line));
    if (!more) break;
    size_t bom = 0;  // A UTF-8 byte order mark before the first line is ignored.
    if (lines->line_number() == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") bom = 3;
    line.remove_prefix(bom);
    if (IsBlank(line)) continue;
    tokens.clear();
    size_t at = 0;
    const absl::Status s = scanner.Scan(line, kLineReadAheadBytes, &tokens, &at);
    at += bom;
    if (!s.ok()) {
      return absl::DataLossError(absl::StrCat(path, ": line ", lines->line_number(),
                                              " (decompressed byte offset ",
                                              lines->line_offset() + at, "): ", s.message()));
    }
    for (int32_t t : tokens) {
      for (int i = 0; i < 4; ++i) tok_buf.push_back(static_cast<char>(t >> (8 * i)));
    }
    total += tokens.size();
    AppendU64(total, &off_buf);
    RETURN_IF_ERROR(tok.Write(&tok_buf, false));
    RETURN_IF_ERROR(off.Write(&off_buf, false));
  }
  RETURN_IF_ERROR(tok.Write(&tok_buf, true));
  RETURN_IF_ERROR(off.Write(&off_buf, true));
  if (unchanged) RETURN_IF_ERROR(unchanged());
  RETURN_IF_ERROR(tok.Commit());
  return off.Commit();  // The .off file commits the cache.
}

uint64_t LoadU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// A cache pair is usable if .off holds N + 1 non-decreasing offsets starting at 0 and
// ending at the .tok token count.
bool CacheConsistent(const ShardFile& tok, const ShardFile& off) {
  const std::string_view o(off.data(), off.size());
  if (o.size() < 8 || o.size() % 8 != 0 || tok.size() % 4 != 0) return false;
  uint64_t prev = 0;
  for (size_t i = 0; i < o.size(); i += 8) {
    const uint64_t v = LoadU64(o.data() + i);
    if ((i == 0 && v != 0) || v < prev) return false;
    prev = v;
  }
  return prev == tok.size() / 4;
}

struct CachePair {
  std::unique_ptr<ShardFile> tok;
  std::unique_ptr<ShardFile> off;
};

// The cache files if both exist and are consistent, else empty. The offsets are read
// into memory (8 bytes a sample); the tokens are read with pread per sample, so a cache
// file shrunk under the daemon is a DATA_LOSS error naming it, not a SIGBUS.
CachePair TryOpenCache(const std::string& prefix) {
  CachePair pair;
  auto off_file = OpenLocalShardFile(prefix + ".off");
  auto tok = OpenLocalShardFile(prefix + ".tok");
  if (!off_file.ok() || !tok.ok()) return pair;
  auto off = MakeResident(*std::move(off_file));
  if (!off.ok() || !CacheConsistent(**tok, **off)) return pair;
  pair.tok = *std::move(tok);
  pair.off = *std::move(off);
  return pair;
}

}  // namespace

bool IsJsonlFileName(std::string_view name) {
  return HasSuffix(name, ".jsonl") || HasSuffix(name, ".jsonl.gz") ||
         HasSuffix(name, ".jsonl.zst");
}

JsonlShard::JsonlShard(std::string path, uint64_t source_bytes, std::string cache_prefix,
                       std::unique_ptr<ShardFile> tok, std::unique_ptr<ShardFile> off)
    : path_(std::move(path)),
      source_bytes_(source_bytes),
      cache_prefix_(std::move(cache_prefix)),
      tok_(std::move(tok)),
      off_(std::move(off)),
      num_samples_(off_->size() / 8 - 1) {}

absl::StatusOr<std::unique_ptr<JsonlShard>> JsonlShard::Open(const std::string& path,
                                                             const std::string& field,
                                                             const std::string& cache_dir,
                                                             uint64_t max_line_bytes,
                                                             TokenCache* token_cache) {
  if (field.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": empty jsonl_field"));
  if (cache_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": empty token cache directory"));
  }
  ASSIGN_OR_RETURN(SourceStat st, StatSource(path));
  std::error_code ec;
  const std::string abs_path = fs::absolute(path, ec).lexically_normal().string();
  if (ec) return absl::InternalError(absl::StrCat("cannot resolve ", path, ": ", ec.message()));
  const std::string prefix =
      (fs::path(cache_dir) / CacheKey(abs_path, st, field)).string();
  return OpenCached(path, st.size, cache_dir, prefix, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<LineReader> lines,
                     LineReader::Open(path, max_line_bytes));
    return BuildCache(lines.get(), path, field, prefix, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(SourceStat after, StatSource(path));
      if (!(after == st)) {
        return absl::AbortedError(
            absl::StrCat(path, " changed while it was converted to a token cache; retry"));
      }
      return absl::OkStatus();
    });
  }, token_cache);
}

absl::StatusOr<std::unique_ptr<JsonlShard>> JsonlShard::Open(std::unique_ptr<ShardFile> source,
                                                             const std::string& version,
                                                             const std::string& field,
                                                             const std::string& cache_dir,
                                                             uint64_t max_line_bytes,
                                                             TokenCache* token_cache) {
  const std::string url = source->path();
  if (field.empty()) return absl::InvalidArgumentError(absl::StrCat(url, ": empty jsonl_field"));
  if (cache_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(url, ": empty token cache directory"));
  }
  const uint64_t size = source->size();
  const std::string prefix =
      (fs::path(cache_dir) / RemoteCacheKey(url, size, version, field)).string();
  return OpenCached(url, size, cache_dir, prefix, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<LineReader> lines,
                     LineReader::Open(std::move(source), max_line_bytes));
    return BuildCache(lines.get(), url, field, prefix, nullptr);
  }, token_cache);
}

absl::StatusOr<std::unique_ptr<JsonlShard>> JsonlShard::OpenCached(
    const std::string& path, uint64_t source_bytes, const std::string& cache_dir,
    const std::string& prefix,
    const std::function<absl::Status()>& build, TokenCache* token_cache) {
  // Pinned before the files are opened, so the budget never deletes them in between.
  TokenCache::Pin pin;
  if (token_cache != nullptr) pin = token_cache->Acquire(fs::path(prefix).filename().string());
  CachePair cache = TryOpenCache(prefix);
  if (cache.tok == nullptr) {
    RETURN_IF_ERROR(EnsureDir(cache_dir));
    RETURN_IF_ERROR(build());
    cache = TryOpenCache(prefix);
    if (cache.tok == nullptr) {
      return absl::InternalError(absl::StrCat("token cache ", prefix,
                                              ".{tok,off} for ", path,
                                              " is inconsistent right after being written"));
    }
    pin.Built();
  } else {
    pin.Hit();
  }
  std::unique_ptr<JsonlShard> shard(new JsonlShard(path, source_bytes, prefix,
                                                   std::move(cache.tok), std::move(cache.off)));
  shard->pin_ = std::move(pin);
  return shard;
}

std::string JsonlShard::FileName() const { return fs::path(path_).filename().string(); }

uint64_t JsonlShard::Offset(uint64_t i) const { return LoadU64(off_->data() + 8 * i); }

uint64_t JsonlShard::SampleLength(uint64_t index) const {
  return Offset(index + 1) - Offset(index);
}

absl::Status JsonlShard::CopyTokens(uint64_t index, uint64_t offset, uint64_t count,
                                    int32_t* out) const {
  return DecodeTokensAt(*tok_, 4 * (Offset(index) + offset), TokenType::kInt32, count, out);
}

}  // namespace zephon::pipeline

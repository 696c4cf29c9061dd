// The on-disk token cache's file machinery, shared by JSONL token-array shards and JSONL
// text shards (jsonl_reader.h documents the layout and the keys): source identity,
// cache keys, the 0700 cache directory, atomically committed temporary files, opening
// and checking a cache pair, and the in-process single flight that makes two
// concurrent conversions of one key run once.
// Thread-safety: free functions are thread-safe; TempFile is single-owner;
// ConversionFlights is thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_TOKEN_CACHE_FILES_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_TOKEN_CACHE_FILES_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pipeline/formats/shard_file.h"

namespace zephon::pipeline {

// A local source's identity: size and modification time.
struct SourceStat {
  uint64_t size = 0;
  uint64_t mtime_ns = 0;
  friend bool operator==(const SourceStat& a, const SourceStat& b) {
    return a.size == b.size && a.mtime_ns == b.mtime_ns;
  }
};

// NOT_FOUND / PERMISSION_DENIED naming `path`; FAILED_PRECONDITION if not a regular file.
absl::StatusOr<SourceStat> StatSource(const std::string& path);

void AppendU64(uint64_t v, std::string* out);
uint64_t LoadU64(const char* p);

// The bytes that identify a source in a cache key: absolute path "\0" u64 LE size,
// u64 LE mtime_ns; for an object-store source "remote\0" URL "\0" u64 LE size,
// version "\0".
std::string LocalSourceIdentity(const std::string& abs_path, const SourceStat& st);
std::string RemoteSourceIdentity(const std::string& url, uint64_t size,
                                 const std::string& version);

// 16 hex digits of HashBytes(domain "\0" identity rest).
std::string CacheKey(std::string_view domain, std::string_view identity, std::string_view rest);

// mkdir -p with mode 0700 for every directory it creates. PERMISSION_DENIED naming it.
absl::Status EnsureDir(const std::string& dir);

// A temporary file next to `final_path`, unlinked on destruction unless Commit()ed by
// renaming onto final_path. Errors are INTERNAL naming the temporary file.
class TempFile {
 public:
  explicit TempFile(std::string final_path);
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile();

  absl::Status Create();
  // Appends *buffer and clears it once it holds at least 1 MiB, or always with `force`.
  absl::Status Write(std::string* buffer, bool force);
  // fsyncs, closes and renames onto the final path.
  absl::Status Commit();

 private:
  absl::Status Error(const char* what) const;

  const std::string final_;
  std::string temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes a cache at `prefix` sample by sample into temporary files; Commit renames them
// into place. `with_mask`: the cache also holds <prefix>.msk, the samples' loss masks
// (loss_mask.h), one byte (0 or 1) per token in .tok's order. `with_payload`: it also
// holds <prefix>.pay, each sample's source record (a JSON object, UTF-8) back to back, and
// <prefix>.pao, N + 1 u64 LE byte offsets into it (TextTokenization::keep_payload). Single-owner.
class CacheWriter {
 public:
  explicit CacheWriter(const std::string& prefix, bool with_mask = false,
                       bool with_payload = false);
  absl::Status Create();
  // Appends one sample of n tokens; `mask` (n bytes) is required with with_mask and
  // ignored without (a sample without a mask of its own is then all ones). `payload` is
  // the sample's source record with with_payload (ignored without).
  absl::Status Add(const int32_t* ids, size_t n, const uint8_t* mask = nullptr,
                   std::string_view payload = {});
  // Commits <prefix>.tok (and .msk, .pay, .pao), then <prefix><suffix> holding `bytes`
  // for each extra file, then <prefix>.off, which commits the cache (a reader checks
  // .off last).
  absl::Status Commit(const std::vector<std::pair<std::string, std::string>>& extra = {});
  bool with_mask() const { return msk_ != nullptr; }

 private:
  const std::string prefix_;
  TempFile tok_, off_;
  std::unique_ptr<TempFile> msk_;        // with_mask only
  std::unique_ptr<TempFile> pay_, pao_;  // with_payload only
  std::string tok_buf_, off_buf_, msk_buf_, pay_buf_, pao_buf_;
  uint64_t total_ = 0;
  uint64_t payload_total_ = 0;
};

// An open cache: <prefix>.tok (int32 LE tokens) and <prefix>.off (N + 1 u64 LE offsets),
// .off read into memory.
struct CachePair {
  std::unique_ptr<ShardFile> tok;
  std::unique_ptr<ShardFile> off;
  std::unique_ptr<ShardFile> msk;  // with_mask only: one byte per token
  std::unique_ptr<ShardFile> pay;  // with_payload only: the samples' source records
  std::unique_ptr<ShardFile> pao;  // with_payload only: N + 1 offsets into .pay, resident
};

// The cache at `prefix` if both files exist and .off holds N + 1 non-decreasing offsets
// from 0 to the .tok token count (and, `with_mask`, .msk exists with one byte per
// token; `with_payload`, .pao holds N + 1 non-decreasing offsets from 0 to .pay's size);
// else an empty pair (the caller rebuilds).
CachePair TryOpenCache(const std::string& prefix, bool with_mask = false,
                       bool with_payload = false);

// In-process single flight for conversions: Hold(key) blocks while another thread
// holds the same key. A converter holds its cache prefix while it checks for and
// builds the cache, so a second opener of that key waits and then finds the cache the
// first one committed (or, if the first failed, converts itself). Across processes the
// atomic renames keep racing converters harmless.
class ConversionFlights {
 public:
  // The process-wide instance.
  static ConversionFlights& Global();

  class Hold {
   public:
    Hold(ConversionFlights* flights, std::string key);
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    ConversionFlights* const flights_;
    const std::string key_;
  };

 private:
  absl::Mutex mu_;
  std::set<std::string> held_ ABSL_GUARDED_BY(mu_);
  absl::CondVar released_;  // Signalled whenever a key is released.
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_TOKEN_CACHE_FILES_H_

#include "daemon/pipeline/formats/token_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace zephon::pipeline {
namespace {

// The files of one entry; .off first: deleting it first uncommits the entry.
constexpr const char* kEntrySuffixes[] = {".off", ".tok", ".stats", ".msk", ".pay", ".pao"};
constexpr int kNumEntrySuffixes = 6;
static_assert(std::size(kEntrySuffixes) == kNumEntrySuffixes);

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
}

// The entry file suffix `name` ends with (kEntrySuffixes), or empty.
absl::string_view EntrySuffix(absl::string_view name) {
  for (const char* suffix : kEntrySuffixes) {
    if (absl::EndsWith(name, suffix) && name.size() > strlen(suffix)) return suffix;
  }
  return {};
}

// For "<key><suffix>.tmp.<pid>.<salt>" (jsonl_reader.cc's TempFile): the pid; else 0.
pid_t TempFilePid(absl::string_view name) {
  const size_t at = name.rfind(".tmp.");
  if (at == absl::string_view::npos || EntrySuffix(name.substr(0, at)).empty()) return 0;
  absl::string_view rest = name.substr(at + 5);
  const size_t dot = rest.find('.');
  if (dot == absl::string_view::npos) return 0;
  int pid = 0;
  if (!absl::SimpleAtoi(rest.substr(0, dot), &pid) || pid <= 0) return 0;
  return pid;
}

bool ProcessGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

// Cache keys are hex digests (jsonl_reader.cc); only files named so are deleted as
// orphans, so another tool's "notes.stats" in a shared --cache-dir is left alone.
bool IsHexKey(absl::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

// What opendir(dir) failing with `err` means: OK for a missing directory (created on
// the first conversion), else an error naming it and the fix.
absl::Status ListingError(const std::string& dir, int err) {
  if (err == ENOENT) return absl::OkStatus();
  std::string msg = absl::StrCat("cannot list the token cache directory ", dir, ": ",
                                 strerror(err), " (fix its permissions or pass another "
                                 "--cache-dir)");
  return err == EACCES ? absl::PermissionDeniedError(msg) : absl::InternalError(msg);
}

// OK when `dir` can be listed or does not exist.
absl::Status CheckListable(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return ListingError(dir, errno);
  closedir(d);
  return absl::OkStatus();
}

}  // namespace

TokenCache::Pin& TokenCache::Pin::operator=(Pin&& other) noexcept {
  if (this != &other) {
    Release();
    cache_ = std::move(other.cache_);
    key_ = std::move(other.key_);
    other.cache_ = nullptr;
  }
  return *this;
}

void TokenCache::Pin::Hit() {
  if (cache_ != nullptr) cache_->Hit(key_);
}

void TokenCache::Pin::Built() {
  if (cache_ != nullptr) cache_->Built(key_);
}

void TokenCache::Pin::Release() {
  if (cache_ == nullptr) return;
  cache_->Unpin(key_);
  cache_ = nullptr;
}

TokenCache::TokenCache(std::string dir, uint64_t budget_bytes)
    : dir_(std::move(dir)), budget_bytes_(budget_bytes) {
  stats_.dir = dir_;
  stats_.budget_bytes = budget_bytes_;
}

TokenCache::~TokenCache() {
  if (scanner_.joinable()) scanner_.join();
}

absl::StatusOr<std::shared_ptr<TokenCache>> TokenCache::Create(std::string dir,
                                                               uint64_t budget_bytes) {
  if (dir.empty()) return absl::InvalidArgumentError("token cache: empty directory");
  if (absl::Status listable = CheckListable(dir); !listable.ok()) return listable;
  std::shared_ptr<TokenCache> cache(new TokenCache(std::move(dir), budget_bytes));
  auto scan = [raw = cache.get()] {
    if (absl::Status scanned = raw->Scan(); !scanned.ok()) {
      spdlog::error("token cache: {}; starting with an empty cache", scanned.ToString());
    }
    raw->scanned_.Notify();
  };
  try {
    // The thread holds no reference: the destructor joins it.
    cache->scanner_ = std::thread(scan);
  } catch (const std::system_error& e) {
    spdlog::warn("token cache: no thread for the start-up scan ({}); scanning now", e.what());
    scan();
  }
  return cache;
}

std::string TokenCache::PathOf(const std::string& key, const char* suffix) const {
  return absl::StrCat(dir_, "/", key, suffix);
}

absl::Status TokenCache::Scan() {
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return ListingError(dir_, errno);
  struct Group {
    struct stat st[kNumEntrySuffixes];
    bool present[kNumEntrySuffixes] = {};  // indexed like kEntrySuffixes
  };
  std::map<std::string, Group> groups;
  const int64_t now_ns = absl::ToUnixNanos(absl::Now());
  const int64_t grace_ns = absl::ToInt64Nanoseconds(kOrphanGrace);
  uint64_t removed = 0;
  while (const struct dirent* ent = readdir(d)) {
    const std::string name = ent->d_name;
    if (name.empty() || name[0] == '.') continue;
    const std::string path = absl::StrCat(dir_, "/", name);
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (const pid_t pid = TempFilePid(name); pid != 0) {
      // A build in flight keeps writing its temporary files, and a pid of another PID
      // namespace (a container sharing the directory) looks gone: only old files go.
      if (pid != getpid() && ProcessGone(pid) && now_ns - MtimeNs(st) > grace_ns &&
          unlink(path.c_str()) == 0) {
        ++removed;
      }
      continue;
    }
    const absl::string_view suffix = EntrySuffix(name);
    if (suffix.empty()) continue;  // not ours (objects/ is the shard cache's)
    const size_t i = std::find_if(std::begin(kEntrySuffixes), std::end(kEntrySuffixes),
                                  [&](const char* s) { return suffix == s; }) -
                     std::begin(kEntrySuffixes);
    Group& g = groups[name.substr(0, name.size() - suffix.size())];
    g.st[i] = st;
    g.present[i] = true;
  }
  closedir(d);

  absl::MutexLock lock(&mu_);
  for (const auto& [key, g] : groups) {
    if (g.present[0] && g.present[1]) {
      Entry& e = entries_[key];
      e.committed = true;
      for (int i = 0; i < kNumEntrySuffixes; ++i) {
        if (g.present[i]) e.bytes += static_cast<uint64_t>(g.st[i].st_size);
      }
      e.last_use_ns = MtimeNs(g.st[0]);
      last_stamp_ns_ = std::max(last_stamp_ns_, e.last_use_ns);
      lru_.insert({e.last_use_ns, key});
      stats_.bytes += e.bytes;
      ++stats_.entries;
      ++stats_.adopted;
      continue;
    }
    // Not committed. An .off without its .tok can never become usable (.tok is renamed
    // into place first); a lone .tok/.stats/.msk is garbage unless a build is committing
    // it.
    if (!IsHexKey(key)) continue;
    for (int i = 0; i < kNumEntrySuffixes; ++i) {
      if (!g.present[i]) continue;
      if (i != 0 && now_ns - MtimeNs(g.st[i]) <= grace_ns) continue;
      if (unlink(PathOf(key, kEntrySuffixes[i]).c_str()) == 0) ++removed;
    }
  }
  stats_.stale_removed = removed;
  if (stats_.adopted > 0 || removed > 0) {
    spdlog::info("token cache: adopted {} entries ({} bytes) from {}; removed {} stale files",
                 stats_.adopted, stats_.bytes, dir_, removed);
  }
  EvictLocked();
  return absl::OkStatus();
}

TokenCache::Pin TokenCache::Acquire(const std::string& key) {
  scanned_.WaitForNotification();
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[key];
  if (e.pins == 0 && e.committed) lru_.erase({e.last_use_ns, key});
  ++e.pins;
  return Pin(shared_from_this(), key);
}

void TokenCache::Hit(const std::string& key) {
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[key];
  ++stats_.hits;
  // Unknown here when another process (or an unmanaged open) committed it after Scan.
  const bool adopt = !e.committed;
  if (adopt) CommitLocked(key, e);
  TouchLocked(key, e);
  if (adopt) EvictLocked();
}

void TokenCache::Built(const std::string& key) {
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[key];
  CommitLocked(key, e);
  ++stats_.misses;
  stats_.bytes_built += e.bytes;
  TouchLocked(key, e);
  EvictLocked();
}

void TokenCache::Unpin(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.pins == 0) return;  // unreachable: Pin owns one
  Entry& e = it->second;
  if (--e.pins > 0) return;
  if (!e.committed) {  // its build failed: nothing on disk to account for
    entries_.erase(it);
    return;
  }
  lru_.insert({e.last_use_ns, key});
  EvictLocked();
}

void TokenCache::CommitLocked(const std::string& key, Entry& e) {
  uint64_t bytes = 0;
  for (const char* suffix : kEntrySuffixes) {
    struct stat st;
    if (stat(PathOf(key, suffix).c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_size);
  }
  if (e.committed) {
    stats_.bytes -= e.bytes;
  } else {
    ++stats_.entries;
  }
  e.committed = true;
  e.bytes = bytes;
  stats_.bytes += bytes;
}

void TokenCache::TouchLocked(const std::string& key, Entry& e) {
  // Strictly increasing, so two uses within one clock tick keep their order on disk.
  last_stamp_ns_ = std::max(absl::ToUnixNanos(absl::Now()), last_stamp_ns_ + 1);
  e.last_use_ns = last_stamp_ns_;
  struct timespec times[2];
  times[0].tv_sec = 0;
  times[0].tv_nsec = UTIME_OMIT;
  times[1].tv_sec = static_cast<time_t>(e.last_use_ns / 1000000000LL);
  times[1].tv_nsec = static_cast<long>(e.last_use_ns % 1000000000LL);
  const std::string off = PathOf(key, ".off");
  if (utimensat(AT_FDCWD, off.c_str(), times, 0) != 0) {
    // The order in memory still holds; only a restart would see an older last use.
    spdlog::debug("token cache: cannot set the mtime of {}: {}", off, strerror(errno));
  }
}

void TokenCache::EvictLocked() {
  if (budget_bytes_ == 0) return;
  while (stats_.bytes > budget_bytes_ && !lru_.empty()) {
    const std::string key = lru_.begin()->second;
    lru_.erase(lru_.begin());
    auto it = entries_.find(key);
    for (const char* suffix : kEntrySuffixes) {
      const std::string path = PathOf(key, suffix);
      if (unlink(path.c_str()) != 0 && errno != ENOENT) {
        spdlog::warn("token cache: cannot delete {} (evicted): {}", path, strerror(errno));
      }
    }
    stats_.bytes -= it->second.bytes;
    --stats_.entries;
    ++stats_.evictions;
    stats_.evicted_bytes += it->second.bytes;
    entries_.erase(it);
  }
  stats_.over_budget = stats_.bytes > budget_bytes_;
  if (stats_.over_budget && !warned_over_budget_) {
    spdlog::warn("token cache: {} bytes of entries in use exceed --token-cache-bytes={} in "
                 "{}; they are evicted once released (raise the budget to keep them all)",
                 stats_.bytes, budget_bytes_, dir_);
  }
  warned_over_budget_ = stats_.over_budget;
}

TokenCacheStats TokenCache::Stats() const {
  scanned_.WaitForNotification();
  absl::MutexLock lock(&mu_);
  TokenCacheStats out = stats_;
  for (const auto& [key, e] : entries_) {
    if (e.committed && e.pins > 0) out.pinned_bytes += e.bytes;
  }
  return out;
}

}  // namespace zephon::pipeline

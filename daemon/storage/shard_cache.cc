#include "daemon/storage/shard_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>
#include <zlib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/storage/sigv4.h"

namespace zephon::storage {
namespace {

constexpr char kMagic[8] = {'Z', 'S', 'C', 'A', 'C', 'H', 'E', '1'};
constexpr size_t kFixedHeaderBytes = 24;  // magic, u64 payload, u32 crc, u32 identity
constexpr char kEntrySuffix[] = ".blk";
constexpr char kTempPrefix[] = ".tmp.";
constexpr char kLockName[] = ".lock";
constexpr uint64_t kMaxBlockBytes = uint64_t{1} << 30;

uint32_t Crc32(const char* data, uint64_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const uInt take = static_cast<uInt>(std::min<uint64_t>(n, uint64_t{1} << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), take);
    data += take;
    n -= take;
  }
  return static_cast<uint32_t>(crc);
}

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

std::string NameOf(const std::string& identity) { return Sha256Hex(identity).substr(0, 32); }

uint64_t HeaderBytes(const std::string& identity) {
  return kFixedHeaderBytes + identity.size();
}

std::string ErrnoText() { return std::strerror(errno); }

// mkdir -p, mode 0700 for the directories it creates.
absl::Status EnsureDir(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(dir, " exists and is not a directory"));
  }
  const size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) RETURN_IF_ERROR(EnsureDir(dir.substr(0, slash)));
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir, ": ", ErrnoText()));
  }
  return absl::OkStatus();
}

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

// The header of an entry file: its identity and payload length, when the file is
// well-formed and of the right size (the CRC is checked separately, on first use).
struct FileHeader {
  std::string identity;
  uint64_t payload_bytes = 0;
  uint32_t crc = 0;
  uint64_t file_bytes = 0;
  absl::Time mtime;
};

bool ReadHeader(const std::string& path, FileHeader* out) {
  // O_NONBLOCK: a FIFO named like an entry must not hang the scan (it fails S_ISREG).
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st;
  char fixed[kFixedHeaderBytes];
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            ReadAll(fd, fixed, sizeof(fixed), 0) && std::memcmp(fixed, kMagic, 8) == 0;
  if (ok) {
    out->payload_bytes = GetU64(fixed + 8);
    out->crc = GetU32(fixed + 16);
    const uint32_t identity_bytes = GetU32(fixed + 20);
    out->file_bytes = static_cast<uint64_t>(st.st_size);
    out->mtime = absl::TimeFromTimespec(st.st_mtim);
    ok = identity_bytes <= 64 * 1024 &&
         out->file_bytes == kFixedHeaderBytes + identity_bytes + out->payload_bytes;
    if (ok) {
      out->identity.resize(identity_bytes);
      ok = ReadAll(fd, out->identity.data(), identity_bytes, kFixedHeaderBytes);
    }
  }
  close(fd);
  return ok;
}

}  // namespace

struct ShardCache::Entry {
  enum class State { kLoading, kReady, kFailed };

  std::string identity;
  // "<dir>/<name>.blk" when on disk (or about to be); "" when held in memory. Decides the
  // entry's charge pool and LRU; changes only while the entry loads (memory fallback).
  std::string path;
  uint64_t payload_bytes = 0;
  uint64_t charge = 0;  // bytes counted in its pool (disk_bytes_ or memory_bytes_)
  State state = State::kLoading;
  absl::Status error;  // kFailed: what the download returned
  int pins = 0;
  bool verified = true;  // false: adopted from disk, CRC not checked yet
  uint32_t crc = 0;      // adopted entries: the CRC their header promises
  absl::Time mtime;      // adopted entries: the file's mtime (initial LRU order)
  // The payload: a whole-file mapping (payload after the header) or memory.
  void* map = nullptr;
  size_t map_bytes = 0;
  size_t header_bytes = 0;
  std::string memory;
  std::list<Entry*>::iterator lru_it;
  std::list<Entry*>::iterator mapped_it;
  bool in_lru = false;
  bool in_mapped_lru = false;

  const char* payload() const {
    return map != nullptr ? static_cast<const char*>(map) + header_bytes : memory.data();
  }
  bool has_payload() const { return map != nullptr || memory.size() == payload_bytes; }
  void Unmap() {
    if (map != nullptr) munmap(map, map_bytes);
    map = nullptr;
    map_bytes = 0;
  }
  ~Entry() { Unmap(); }
};

absl::StatusOr<std::shared_ptr<ShardCache>> ShardCache::Create(ShardCacheOptions options) {
  if (options.block_bytes < 1 || options.block_bytes > kMaxBlockBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard cache block_bytes=", options.block_bytes, " must be in [1, ", kMaxBlockBytes,
        "] (1 GiB)"));
  }
  if (options.max_mapped_entries < 1) {
    return absl::InvalidArgumentError("shard cache max_mapped_entries must be >= 1");
  }
  if (options.wait_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("shard cache wait_timeout must be positive");
  }
  if (options.lock_retry_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("shard cache lock_retry_interval must be positive");
  }
  while (options.dir.size() > 1 && options.dir.back() == '/') options.dir.pop_back();
  return std::shared_ptr<ShardCache>(new ShardCache(std::move(options)));
}

ShardCache::ShardCache(ShardCacheOptions options) : options_(std::move(options)) {
  const bool memory_only = options_.dir.empty() || options_.max_bytes == 0;
  absl::MutexLock lock(&mu_);
  disk_ = memory_only ? Disk::kMemoryOnly : Disk::kNotOpened;
  disk_settled_.store(memory_only, std::memory_order_release);
}

ShardCache::~ShardCache() {
  absl::MutexLock lock(&mu_);
  entries_.clear();
  disk_lru_.clear();
  memory_lru_.clear();
  mapped_lru_.clear();
  if (lock_fd_ >= 0) close(lock_fd_);
}

std::string ShardCache::ObjectId(const RemoteObject& object) {
  std::string id("zephon-shard-cache-v1");
  id.push_back('\0');
  id += object.store_id;
  id.push_back('\0');
  id += object.info.key;
  id.push_back('\0');
  id += object.info.version.empty()
            ? absl::StrCat("mtime:", absl::ToUnixNanos(object.info.mtime))
            : object.info.version;
  id.push_back('\0');
  absl::StrAppend(&id, object.info.size);
  return id;
}

absl::Status ShardCache::Read(ObjectStore& store, const RemoteObject& object, uint64_t offset,
                              uint64_t n, char* out) {
  const uint64_t size = object.info.size;
  if (offset > size || n > size - offset) {
    return absl::OutOfRangeError(absl::StrCat("read of bytes [", offset, ", ", offset + n,
                                              ") passes the end of ", object.url, " (", size,
                                              " bytes when the dataset was opened)"));
  }
  if (n == 0) return absl::OkStatus();
  const uint64_t span = size <= options_.block_bytes ? size : options_.block_bytes;
  uint64_t pos = offset;
  while (pos < offset + n) {
    const uint64_t block = pos / span;
    ASSIGN_OR_RETURN(std::shared_ptr<Entry> entry, Acquire(store, object, block));
    const uint64_t in_block = pos - block * span;
    const uint64_t take = std::min(offset + n - pos, entry->payload_bytes - in_block);
    std::memcpy(out + (pos - offset), entry->payload() + in_block, take);
    Release(entry);
    pos += take;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ShardCache::Entry>> ShardCache::Acquire(
    ObjectStore& store, const RemoteObject& object, uint64_t block) {
  if (!disk_settled_.load(std::memory_order_acquire)) RETURN_IF_ERROR(EnsureDisk(object.url));
  const uint64_t size = object.info.size;
  const bool whole = size <= options_.block_bytes;
  const uint64_t span = whole ? size : options_.block_bytes;
  const uint64_t length = std::min(span, size - block * span);
  // The entry's identity, built in a per-thread buffer: this runs for every Read.
  thread_local std::string identity;
  identity.clear();
  if (object.cache_id.empty()) {
    identity = ObjectId(object);
  } else {
    identity.append(object.cache_id);
  }
  identity.push_back('\0');
  if (whole) {
    identity.append("whole");
  } else {
    absl::StrAppend(&identity, options_.block_bytes, ":", block);
  }

  std::shared_ptr<Entry> entry;
  bool try_file = false;
  std::vector<std::string> doomed;
  {
    absl::MutexLock lock(&mu_);
    for (;;) {
      auto it = entries_.find(identity);
      if (it == entries_.end()) {  // a miss: this thread downloads
        entry = std::make_shared<Entry>();
        entry->identity = identity;
        entry->payload_bytes = length;
        if (disk_ == Disk::kOpen) {
          entry->path = absl::StrCat(options_.dir, "/", NameOf(identity), kEntrySuffix);
          entry->charge = HeaderBytes(identity) + length;
        } else {
          entry->charge = length;
        }
        entry->pins = 1;
        entries_.emplace(identity, entry);
        PoolLocked(*entry) += entry->charge;
        pinned_bytes_ += entry->charge;
        ++counters_.misses;
        EvictLocked(&doomed);
        break;
      }
      std::shared_ptr<Entry> found = it->second;
      if (found->state == Entry::State::kLoading) {  // join the download in flight
        ++counters_.waits;
        const absl::Time deadline = absl::Now() + options_.wait_timeout;
        while (found->state == Entry::State::kLoading) {
          if (loaded_.WaitWithDeadline(&mu_, deadline) &&
              found->state == Entry::State::kLoading) {
            return absl::DeadlineExceededError(absl::StrCat(
                "waited ", absl::FormatDuration(options_.wait_timeout),
                " for another reader's download of ",
                whole ? "" : absl::StrCat("block ", block, " of "), object.url,
                " (is the object store reachable?)"));
          }
        }
        if (found->state == Entry::State::kFailed) return found->error;
        continue;  // ready now (or already evicted again): look it up afresh
      }
      const bool unused = found->pins++ == 0;
      if (unused) {
        pinned_bytes_ += found->charge;
        if (found->in_lru) LruLocked(*found).erase(found->lru_it);
        if (found->in_mapped_lru) mapped_lru_.erase(found->mapped_it);
        found->in_lru = found->in_mapped_lru = false;
      }
      if (!found->verified || !found->has_payload()) {
        // On disk but not mapped (adopted, or unmapped for the mapping budget): this
        // thread maps it (and checks an adopted file's CRC) while others wait. Unmapped
        // entries are never pinned, so this thread holds the only pin.
        found->state = Entry::State::kLoading;
        entry = std::move(found);
        try_file = true;
        break;
      }
      ++counters_.hits;
      return found;
    }
  }
  DeleteFiles(doomed);

  const uint64_t old_charge = entry->charge;
  const bool had_file = !entry->path.empty();
  bool from_file = false;
  const absl::Status loaded = Load(store, object, block, entry.get(), try_file, &from_file);
  absl::MutexLock lock(&mu_);
  if (!loaded.ok()) {
    entry->state = Entry::State::kFailed;
    entry->error = loaded;
    pinned_bytes_ -= old_charge;
    entry->pins = 0;
    RemoveLocked(entry.get(), /*doomed=*/nullptr);  // Load deleted any file it left
    ++counters_.errors;
    loaded_.SignalAll();
    return loaded;
  }
  if (try_file) ++(from_file ? counters_.hits : counters_.misses);
  if (had_file && entry->path.empty()) {
    // The directory refused the block (disk full, mmap failing): it is held in memory
    // now and charged against memory_bytes.
    disk_bytes_ -= old_charge;
    entry->charge = entry->payload_bytes;
    memory_bytes_ += entry->charge;
    pinned_bytes_ = pinned_bytes_ - old_charge + entry->charge;
  }
  if (entry->map != nullptr) ++mapped_;
  entry->state = Entry::State::kReady;
  entry->verified = true;
  loaded_.SignalAll();
  UnmapExcessLocked();
  return entry;
}

absl::Status ShardCache::Load(ObjectStore& store, const RemoteObject& object, uint64_t block,
                              Entry* entry, bool try_file, bool* from_file) {
  if (try_file) {
    const int fd = open(entry->path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    const uint64_t expect = HeaderBytes(entry->identity) + entry->payload_bytes;
    if (fd >= 0 && fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == expect) {
      void* p = mmap(nullptr, expect, PROT_READ, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) {
        entry->map = p;
        entry->map_bytes = expect;
        entry->header_bytes = HeaderBytes(entry->identity);
        if (entry->verified ||
            Crc32(entry->payload(), entry->payload_bytes) == entry->crc) {
          close(fd);
          *from_file = true;
          return absl::OkStatus();
        }
        entry->Unmap();
      }
    }
    if (fd >= 0) close(fd);
    {
      absl::MutexLock lock(&mu_);
      ++counters_.rejected;
    }
    spdlog::warn("shard cache: {} is corrupt or short (for {}); fetching it again",
                 entry->path, object.url);
    unlink(entry->path.c_str());
  }
  ASSIGN_OR_RETURN(std::string payload, Download(store, object, block, entry->payload_bytes));
  {
    absl::MutexLock lock(&mu_);
    ++counters_.downloads;
    counters_.bytes_downloaded += payload.size();
    // An evicted file of the same name may not be deleted yet: do not write over it.
    while (!entry->path.empty() && unlinking_.count(entry->path) > 0) unlinked_.Wait(&mu_);
  }
  if (!entry->path.empty()) {
    bool written = false;
    const absl::Status stored = WriteAndMap(entry, payload, &written);
    if (stored.ok()) return absl::OkStatus();
    // The bytes are good; only the directory refused them. Serve this block from memory
    // (charged against memory_bytes, evicted on its own LRU).
    if (!written && !warned_write_.exchange(true)) {
      spdlog::warn("shard cache: cannot store blocks in {} ({}); keeping such blocks in "
                   "memory, at most {} bytes of them (logged once; free disk space or lower "
                   "--shard-cache-bytes)",
                   options_.dir, stored.ToString(), options_.memory_bytes);
    } else if (written && !warned_map_.exchange(true)) {
      spdlog::warn("shard cache: cannot map entry files of {} ({}); keeping such blocks in "
                   "memory, at most {} bytes of them (logged once; check vm.max_map_count "
                   "and the daemon's memory limits)",
                   options_.dir, stored.ToString(), options_.memory_bytes);
    }
    if (written) unlink(entry->path.c_str());
    entry->path.clear();
  }
  entry->memory = std::move(payload);
  return absl::OkStatus();
}

absl::Status ShardCache::WriteAndMap(Entry* entry, const std::string& payload,
                                     bool* written) const {
  static std::atomic<uint64_t> counter{0};
  const std::string temp =
      absl::StrCat(options_.dir, "/", kTempPrefix, entry->path.substr(options_.dir.size() + 1),
                   ".", getpid(), ".", counter.fetch_add(1));
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", temp, ": ", ErrnoText()));
  }
  std::string header(kFixedHeaderBytes, '\0');
  std::memcpy(header.data(), kMagic, 8);
  PutU64(payload.size(), header.data() + 8);
  PutU32(Crc32(payload.data(), payload.size()), header.data() + 16);
  PutU32(static_cast<uint32_t>(entry->identity.size()), header.data() + 20);
  header += entry->identity;
  absl::Status s = WriteAll(fd, header.data(), header.size(), temp);
  if (s.ok()) s = WriteAll(fd, payload.data(), payload.size(), temp);
  if (close(fd) != 0 && s.ok()) {
    s = absl::InternalError(absl::StrCat("cannot close ", temp, ": ", ErrnoText()));
  }
  if (s.ok() && rename(temp.c_str(), entry->path.c_str()) != 0) {
    s = absl::InternalError(absl::StrCat("cannot rename ", temp, ": ", ErrnoText()));
  }
  if (!s.ok()) {
    unlink(temp.c_str());
    return s;
  }
  *written = true;
  const int rfd = open(entry->path.c_str(), O_RDONLY | O_CLOEXEC);
  if (rfd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", entry->path, ": ", ErrnoText()));
  }
  const size_t bytes = header.size() + payload.size();
  void* p = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, rfd, 0);
  const int map_errno = errno;
  close(rfd);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map ", entry->path, ": ", std::strerror(map_errno)));
  }
  entry->map = p;
  entry->map_bytes = bytes;
  entry->header_bytes = header.size();
  return absl::OkStatus();
}

absl::StatusOr<std::string> ShardCache::Download(ObjectStore& store, const RemoteObject& object,
                                                 uint64_t block, uint64_t length) const {
  const ObjectInfo& info = object.info;
  const bool whole = info.size <= options_.block_bytes;
  const uint64_t offset = whole ? 0 : block * options_.block_bytes;
  const std::string what =
      whole ? object.url
            : absl::StrCat("block ", block, " (bytes [", offset, ", ", offset + length,
                           ")) of ", object.url);
  const std::string changed = absl::StrCat(
      ": the object changed since the dataset was opened (it had ", info.size,
      " bytes then); restart the pipeline to read the new object");
  // With a version, the read is conditional (If-Match on S3, the opened file's version
  // locally): the store fails it instead of returning bytes of a replaced object, in
  // the same request, so a block never mixes two objects.
  const std::string if_version = options_.verify_version ? info.version : std::string();
  absl::StatusOr<std::string> bytes = whole ? store.Get(info.key, if_version)
                                            : store.GetRange(info.key, offset, length, if_version);
  if (!bytes.ok() && IsVersionMismatch(bytes.status())) {
    const std::string found = VersionMismatchFound(bytes.status());
    return absl::FailedPreconditionError(absl::StrCat(
        object.url, " changed since the dataset was opened (version '", info.version, "', ",
        info.size, " bytes then; ",
        found.empty() ? std::string("another version") : absl::StrCat("version '", found, "'"),
        " now): its cached bytes would mix two objects; restart the pipeline to read the new "
        "object"));
  }
  if (!bytes.ok() && absl::IsOutOfRange(bytes.status())) {
    // The range lies within the length seen at open (Read checked it), so the store's
    // "past the end" means the object shrank: a changed length, DATA_LOSS.
    return absl::DataLossError(absl::StrCat("reading ", what, ": the store says it passes "
                                            "the end of the object", changed));
  }
  if (!bytes.ok()) {
    // Short: this message may end up in a ring's 256-byte poison reason. The store's
    // own message usually names the URL already.
    const absl::string_view cause = bytes.status().message();
    std::string where = whole ? "" : absl::StrCat("block ", block);
    if (!absl::StrContains(cause, object.url)) {
      where = absl::StrCat(where, where.empty() ? "" : " of ", object.url);
    }
    return absl::Status(bytes.status().code(),
                        where.empty() ? std::string(cause) : absl::StrCat(where, ": ", cause));
  }
  // Stores without versions (and verify_version = false) only have the length to go by.
  if (bytes->size() != length) {
    return absl::DataLossError(absl::StrCat("reading ", what, ": the store returned ",
                                            bytes->size(), " bytes, expected ", length,
                                            changed));
  }
  return std::move(bytes).value();
}

void ShardCache::Release(const std::shared_ptr<Entry>& entry) {
  std::vector<std::string> doomed;
  {
    absl::MutexLock lock(&mu_);
    if (--entry->pins > 0) return;
    pinned_bytes_ -= entry->charge;
    auto it = entries_.find(entry->identity);
    if (it == entries_.end() || it->second != entry) return;  // not cached (cannot happen)
    std::list<Entry*>& lru = LruLocked(*entry);
    entry->lru_it = lru.insert(lru.end(), entry.get());
    entry->in_lru = true;
    if (entry->map != nullptr) {
      entry->mapped_it = mapped_lru_.insert(mapped_lru_.end(), entry.get());
      entry->in_mapped_lru = true;
    }
    EvictLocked(&doomed);
    UnmapExcessLocked();
  }
  DeleteFiles(doomed);
}

ShardCacheStats ShardCache::Stats() const {
  absl::MutexLock lock(&mu_);
  ShardCacheStats s = counters_;
  // The directory while it is (or may still become, on first use) the cache.
  const bool disk = disk_ == Disk::kNotOpened || disk_ == Disk::kOpen;
  s.dir = disk ? options_.dir : "";
  s.on_disk = disk_ == Disk::kOpen;
  s.limit_bytes = disk ? options_.max_bytes : options_.memory_bytes;
  s.block_bytes = options_.block_bytes;
  s.resident_bytes = disk_bytes_ + memory_bytes_;
  s.memory_resident_bytes = memory_bytes_;
  s.pinned_bytes = pinned_bytes_;
  s.entries = entries_.size();
  return s;
}

absl::Status ShardCache::EnsureDisk(const std::string& url) {
  bool retry = false;
  {
    absl::MutexLock lock(&mu_);
    if (!opening_ && (disk_ == Disk::kNotOpened ||
                      (disk_ == Disk::kLockBusy && absl::Now() >= next_lock_try_))) {
      opening_ = true;
      retry = disk_ == Disk::kLockBusy;
    } else {
      // A first-use scan in flight: wait for it, so that this Read can hit the files it
      // finds. (During a lock retry the cache keeps serving from memory instead.)
      const absl::Time deadline = absl::Now() + options_.wait_timeout;
      while (opening_ && disk_ == Disk::kNotOpened) {
        if (loaded_.WaitWithDeadline(&mu_, deadline) && opening_ &&
            disk_ == Disk::kNotOpened) {
          return absl::DeadlineExceededError(absl::StrCat(
              "waited ", absl::FormatDuration(options_.wait_timeout), " for the shard cache's "
              "scan of ", options_.dir, " before reading ", url, " (is the disk responding?)"));
        }
      }
      return absl::OkStatus();
    }
  }
  OpenDisk(retry);
  return absl::OkStatus();
}

void ShardCache::OpenDisk(bool retry) {
  // Fails for good (a directory that cannot be made) or for now (the lock is held).
  const auto give_up = [this](Disk disk) {
    absl::MutexLock lock(&mu_);
    disk_ = disk;
    opening_ = false;
    if (disk == Disk::kLockBusy) {
      next_lock_try_ = absl::Now() + options_.lock_retry_interval;
    } else {
      disk_settled_.store(true, std::memory_order_release);
    }
    loaded_.SignalAll();
  };
  const absl::Status made = EnsureDir(options_.dir);
  if (!made.ok()) {
    spdlog::error("shard cache: {}; caching in memory only (fix the directory or pass "
                  "another --cache-dir)", made.ToString());
    give_up(Disk::kMemoryOnly);
    return;
  }
  const std::string lock_path = absl::StrCat(options_.dir, "/", kLockName);
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string why = fd < 0 ? ErrnoText() : "flock held";
    if (fd >= 0) close(fd);
    if (!retry) {
      spdlog::warn("shard cache: {} is in use by another zephond ({}); this daemon caches "
                   "dataset blocks in memory only and tries again every {} (a predecessor "
                   "that is still exiting releases it; otherwise give each zephond its own "
                   "--cache-dir)",
                   options_.dir, why, absl::FormatDuration(options_.lock_retry_interval));
    } else {
      spdlog::debug("shard cache: {} is still in use by another zephond ({})", options_.dir,
                    why);
    }
    give_up(Disk::kLockBusy);
    return;
  }
  if (options_.TEST_before_scan) options_.TEST_before_scan();
  std::vector<std::shared_ptr<Entry>> found;
  const uint64_t rejected = ScanDir(options_.dir, &found);
  const size_t adopted = found.size();
  std::vector<std::string> doomed;
  uint64_t disk_bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    lock_fd_ = fd;
    disk_ = Disk::kOpen;
    opening_ = false;
    counters_.rejected += rejected;
    AdoptLocked(std::move(found), &doomed);
    EvictLocked(&doomed);
    disk_bytes = disk_bytes_;
    disk_settled_.store(true, std::memory_order_release);
    loaded_.SignalAll();
  }
  DeleteFiles(doomed);
  if (retry) {
    spdlog::info("shard cache: {} is free now; caching dataset blocks there (adopted {} "
                 "entries, {} bytes)", options_.dir, adopted, disk_bytes);
  } else if (adopted > 0) {
    spdlog::info("shard cache: adopted {} entries ({} bytes) from {}", adopted, disk_bytes,
                 options_.dir);
  }
}

uint64_t ShardCache::ScanDir(const std::string& dir, std::vector<std::shared_ptr<Entry>>* found) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  uint64_t rejected = 0;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    const std::string path = absl::StrCat(dir, "/", name);
    if (absl::StartsWith(name, kTempPrefix)) {  // a download that never finished
      unlink(path.c_str());
      ++rejected;
      continue;
    }
    if (!absl::EndsWith(name, kEntrySuffix)) continue;
    FileHeader h;
    if (!ReadHeader(path, &h) || name != absl::StrCat(NameOf(h.identity), kEntrySuffix)) {
      unlink(path.c_str());
      ++rejected;
      continue;
    }
    auto entry = std::make_shared<Entry>();
    entry->path = path;
    entry->identity = std::move(h.identity);
    entry->payload_bytes = h.payload_bytes;
    entry->charge = h.file_bytes;
    entry->state = Entry::State::kReady;
    entry->verified = false;
    entry->crc = h.crc;
    entry->mtime = h.mtime;
    found->push_back(std::move(entry));
  }
  closedir(d);
  std::sort(found->begin(), found->end(),
            [](const std::shared_ptr<Entry>& a, const std::shared_ptr<Entry>& b) {
              return a->mtime < b->mtime;
            });
  return rejected;
}

void ShardCache::AdoptLocked(std::vector<std::shared_ptr<Entry>> found,
                             std::vector<std::string>* doomed) {
  for (std::shared_ptr<Entry>& entry : found) {
    if (entries_.count(entry->identity) > 0) {
      // Cached in memory meanwhile (a lock retry): the file would be charged twice.
      DoomLocked(entry->path, doomed);
      continue;
    }
    entry->lru_it = disk_lru_.insert(disk_lru_.end(), entry.get());
    entry->in_lru = true;
    disk_bytes_ += entry->charge;
    ++counters_.adopted;
    std::string identity = entry->identity;
    entries_.emplace(std::move(identity), std::move(entry));
  }
}

uint64_t& ShardCache::PoolLocked(const Entry& entry) {
  return entry.path.empty() ? memory_bytes_ : disk_bytes_;
}

std::list<ShardCache::Entry*>& ShardCache::LruLocked(const Entry& entry) {
  return entry.path.empty() ? memory_lru_ : disk_lru_;
}

void ShardCache::EvictLocked(std::vector<std::string>* doomed) {
  while (disk_bytes_ > options_.max_bytes && !disk_lru_.empty()) {
    RemoveLocked(disk_lru_.front(), doomed);
    ++counters_.evictions;
  }
  while (memory_bytes_ > options_.memory_bytes && !memory_lru_.empty()) {
    RemoveLocked(memory_lru_.front(), doomed);
    ++counters_.evictions;
  }
  const bool disk_over = disk_bytes_ > options_.max_bytes;
  if ((disk_over || memory_bytes_ > options_.memory_bytes) && !warned_over_limit_) {
    warned_over_limit_ = true;
    spdlog::warn("shard cache {} holds {} bytes, over its {}-byte limit, because {} bytes "
                 "are being read or downloaded; they are evicted once released (logged "
                 "once)", disk_over ? options_.dir : "(memory)",
                 disk_over ? disk_bytes_ : memory_bytes_,
                 disk_over ? options_.max_bytes : options_.memory_bytes, pinned_bytes_);
  }
}

void ShardCache::RemoveLocked(Entry* entry, std::vector<std::string>* doomed) {
  if (entry->in_lru) LruLocked(*entry).erase(entry->lru_it);
  if (entry->in_mapped_lru) mapped_lru_.erase(entry->mapped_it);
  entry->in_lru = entry->in_mapped_lru = false;
  if (entry->map != nullptr) --mapped_;
  if (doomed != nullptr && !entry->path.empty()) DoomLocked(entry->path, doomed);
  PoolLocked(*entry) -= entry->charge;
  // Waiters of a failed download may still hold the entry; the last reference unmaps.
  auto it = entries_.find(entry->identity);
  if (it != entries_.end() && it->second.get() == entry) entries_.erase(it);
}

void ShardCache::DoomLocked(const std::string& path, std::vector<std::string>* doomed) {
  ++unlinking_[path];
  doomed->push_back(path);
}

void ShardCache::DeleteFiles(const std::vector<std::string>& doomed) {
  if (doomed.empty()) return;
  for (const std::string& path : doomed) unlink(path.c_str());
  absl::MutexLock lock(&mu_);
  for (const std::string& path : doomed) {
    auto it = unlinking_.find(path);
    if (--it->second == 0) unlinking_.erase(it);
  }
  unlinked_.SignalAll();
}

void ShardCache::UnmapExcessLocked() {
  while (mapped_ > options_.max_mapped_entries && !mapped_lru_.empty()) {
    Entry* e = mapped_lru_.front();
    mapped_lru_.pop_front();
    e->in_mapped_lru = false;
    e->Unmap();
    --mapped_;
  }
}

}  // namespace zephon::storage

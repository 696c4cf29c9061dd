// Entry files of the shard cache's directory (shard_cache.h): the on-disk format of one
// cached block, its file name, and writing, validating, scanning and mapping such files.
// This module knows one file (or one directory listing) at a time; which entries exist,
// their LRU order, limits, pinning and the directory lock are ShardCache's policy.
//
// Format of <dir>/<name>.blk (integers little-endian):
//   [0, 8)    magic "ZSCACHE1"
//   [8, 16)   u64 payload bytes
//   [16, 20)  u32 CRC-32 (zlib) of the payload
//   [20, 24)  u32 identity bytes (at most 64 KiB)
//   [24, 24 + identity bytes)  the identity (ShardCache's key of the block)
//   then the payload
// The name is the first 32 lowercase hex digits of SHA-256(identity). A file is written as
// <dir>/.tmp.<name>.blk.<pid>.<n> and renamed into place when complete, without fsync:
// after a crash a torn or short file fails the size check of ReadEntryHeader or
// MapEntryFile, or its CRC check, and the caller fetches the block again.
//
// Thread-safety: the functions are thread-safe (they share no state; concurrent writers
// of one entry each use their own temp file and the last rename wins). EntryFileMap is
// single-owner: one thread at a time.
#ifndef ZEPHON_DAEMON_STORAGE_SHARD_CACHE_FILE_H_
#define ZEPHON_DAEMON_STORAGE_SHARD_CACHE_FILE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace zephon::storage {

inline constexpr char kEntryFileSuffix[] = ".blk";
inline constexpr char kEntryTempPrefix[] = ".tmp.";
// Bytes of the header before the identity: magic, payload bytes, CRC, identity bytes.
inline constexpr size_t kEntryFixedHeaderBytes = 24;
// Longest identity ReadEntryHeader accepts.
inline constexpr uint32_t kMaxEntryIdentityBytes = 64 * 1024;

// "<32 hex of SHA-256(identity)>.blk": the file name of the entry of `identity`.
std::string EntryFileName(const std::string& identity);

// Header bytes (fixed part + identity) of the entry file of `identity`; the file is this
// plus the payload bytes.
uint64_t EntryHeaderBytes(const std::string& identity);

// CRC-32 (zlib's) of data[0, n), for any n.
uint32_t EntryCrc32(const char* data, uint64_t n);

// The header of the entry file of `identity` holding `payload`.
std::string EncodeEntryHeader(const std::string& identity, absl::string_view payload);

// mkdir -p of the cache directory, mode 0700 for the directories it creates.
// Errors: FAILED_PRECONDITION when `dir` (or a parent) exists and is not a directory;
// PERMISSION_DENIED naming the directory mkdir refused (with errno's text).
absl::Status EnsureEntryDir(const std::string& dir);

// Writes the entry file `path` ("<dir>/<name>.blk") of `identity` holding `payload`: a
// temp file in the same directory, renamed over `path` once complete (no fsync).
// Errors (each names the file): RESOURCE_EXHAUSTED when the disk is full (ENOSPC);
// INTERNAL for any other failure to create, write, close or rename. On an error no temp
// file is left and `path` is untouched.
absl::Status WriteEntryFile(const std::string& path, const std::string& identity,
                            absl::string_view payload);

// What ReadEntryHeader found in a well-formed entry file.
struct EntryFileHeader {
  std::string identity;
  uint64_t payload_bytes = 0;
  uint32_t crc = 0;         // the CRC the header promises (not checked by ReadEntryHeader)
  uint64_t file_bytes = 0;  // header + payload
  absl::Time mtime;
};

// Reads and validates the header of `path`: a regular file (a FIFO or device fails
// without blocking; a symlink fails) that starts with the magic, whose identity is at
// most kMaxEntryIdentityBytes and whose size is exactly header + payload. The payload's
// CRC is not checked (MapEntryFile does that). false: not a valid entry file (missing,
// unreadable, torn, short or foreign); *out is then unspecified.
bool ReadEntryHeader(const std::string& path, EntryFileHeader* out);

struct ScannedEntryFile {
  std::string path;  // "<dir>/<name>.blk"
  EntryFileHeader header;
};

// Lists the valid entry files of `dir` into *found, oldest mtime first, and deletes the
// stray ones: every "<dir>/.tmp.*" (a write that never finished) and every *.blk file
// that fails ReadEntryHeader or is not named after its identity. Other files are left
// alone. Returns how many files it deleted; a directory that cannot be opened: 0.
uint64_t ScanEntryDir(const std::string& dir, std::vector<ScannedEntryFile>* found);

// A read-only, shared mapping of a whole entry file; empty when default-constructed,
// moved from or Reset. Unmaps on destruction. Single-owner.
class EntryFileMap {
 public:
  EntryFileMap() = default;
  EntryFileMap(EntryFileMap&& other) noexcept;
  EntryFileMap& operator=(EntryFileMap&& other) noexcept;
  EntryFileMap(const EntryFileMap&) = delete;
  EntryFileMap& operator=(const EntryFileMap&) = delete;
  ~EntryFileMap() { Reset(); }

  bool mapped() const { return addr_ != nullptr; }
  // The payload (after the header). REQUIRES: mapped(). Valid until Reset/destruction.
  const char* payload() const { return static_cast<const char*>(addr_) + header_bytes_; }
  // Unmaps (a no-op when empty).
  void Reset();

 private:
  friend absl::StatusOr<EntryFileMap> MapEntryFile(const std::string&, const std::string&,
                                                   uint64_t, std::optional<uint32_t>);
  void* addr_ = nullptr;
  size_t bytes_ = 0;
  size_t header_bytes_ = 0;
};

// Maps the entry file `path` of `identity` with `payload_bytes` of payload, after checking
// that its size is header + payload_bytes, and, given expect_crc, that the payload's
// CRC-32 is *expect_crc. The header itself is not re-read (ReadEntryHeader or
// WriteEntryFile vouched for it).
// Errors (each names the file): INTERNAL when it cannot be opened or stat'ed; DATA_LOSS
// for another size or a CRC mismatch (torn, short or corrupt: delete it and fetch the
// block again); RESOURCE_EXHAUSTED when mmap fails (e.g. vm.max_map_count reached).
absl::StatusOr<EntryFileMap> MapEntryFile(const std::string& path, const std::string& identity,
                                          uint64_t payload_bytes,
                                          std::optional<uint32_t> expect_crc);

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_SHARD_CACHE_FILE_H_

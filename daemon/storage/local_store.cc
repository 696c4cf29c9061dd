#include "daemon/storage/local_store.h"

#include <errno.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace zephon::storage {
namespace {

// "<what> '<path>': <strerror>", with the errno mapped to a canonical code.
absl::Status PathError(int err, absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, " '", path, "'"));
}

absl::Status MkdirAll(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat("'", dir, "' is not a directory"));
  }
  const size_t slash = dir.rfind('/');
  if (slash != std::string::npos && slash > 0) RETURN_IF_ERROR(MkdirAll(dir.substr(0, slash)));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return PathError(errno, "cannot create directory", dir);
  }
  return absl::OkStatus();
}

// Objects are replaced by rename, so a new version has a new inode or mtime.
std::string LocalVersion(const FileStat& st) {
  return absl::StrCat(st.size, "-", absl::ToInt64Nanoseconds(st.mtime - absl::UnixEpoch()), "-",
                      st.inode);
}

ObjectInfo InfoOf(const std::string& key, const FileStat& st) {
  return ObjectInfo{key, st.size, st.mtime, LocalVersion(st)};
}

absl::Status NotARegularFile(const std::string& path) {
  return absl::FailedPreconditionError(
      absl::StrCat("object path '", path, "' is not a regular file"));
}

// The entries of directory `dir` but temp files, in directory order. A missing
// directory (or a file) has none.
absl::Status ReadNames(Env* env, const std::string& dir, std::vector<std::string>* names) {
  absl::StatusOr<std::vector<std::string>> listed = env->ListDirectory(dir);
  if (absl::IsNotFound(listed.status())) return absl::OkStatus();
  if (!listed.ok()) return listed.status();
  for (std::string& name : *listed) {
    if (!absl::StartsWith(name, kLocalTempPrefix)) names->push_back(std::move(name));
  }
  return absl::OkStatus();
}

// Env::Stat of a listed entry; nullopt when it vanished since the listing (raced with a
// Delete).
absl::StatusOr<std::optional<FileStat>> StatListed(Env* env, const std::string& path) {
  absl::StatusOr<FileStat> st = env->Stat(path);
  if (absl::IsNotFound(st.status())) return std::nullopt;
  if (!st.ok()) return st.status();
  return *st;
}

// Whether List would find an object under directory `dir`: a regular file, not a temp
// file, at any depth. Stops at the first one.
absl::StatusOr<bool> HoldsObject(Env* env, const std::string& dir) {
  std::vector<std::string> names;
  RETURN_IF_ERROR(ReadNames(env, dir, &names));
  std::vector<std::string> subdirs;
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    ASSIGN_OR_RETURN(const std::optional<FileStat> st, StatListed(env, path));
    if (!st.has_value()) continue;
    if (st->is_regular) return true;
    if (st->is_directory) subdirs.push_back(path);
  }
  for (const std::string& sub : subdirs) {  // this level's files before any subtree
    ASSIGN_OR_RETURN(bool found, HoldsObject(env, sub));
    if (found) return true;
  }
  return false;
}

// Appends every regular file under `dir` (key prefix `key_dir`, "" or ending in '/')
// whose key starts with `prefix`. Missing directories contribute nothing.
absl::Status Walk(Env* env, const std::string& dir, const std::string& key_dir,
                  const std::string& prefix, std::vector<ObjectInfo>* out) {
  std::vector<std::string> names;
  RETURN_IF_ERROR(ReadNames(env, dir, &names));
  for (const std::string& name : names) {
    const std::string key = key_dir + name;
    const std::string path = dir + "/" + name;
    ASSIGN_OR_RETURN(const std::optional<FileStat> st, StatListed(env, path));
    if (!st.has_value()) continue;
    if (st->is_directory) {
      // Prune subtrees that cannot contain a match: key/ must be a prefix of `prefix`
      // or have `prefix` as its prefix.
      const std::string sub = key + "/";
      if (absl::StartsWith(sub, prefix) || absl::StartsWith(prefix, sub)) {
        RETURN_IF_ERROR(Walk(env, path, sub, prefix, out));
      }
    } else if (st->is_regular && absl::StartsWith(key, prefix)) {
      out->push_back(InfoOf(key, *st));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalStore>> LocalStore::Open(const std::string& root,
                                                              Env* env) {
  if (root.empty()) return absl::InvalidArgumentError("local store root is empty");
  std::string trimmed = root;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  RETURN_IF_ERROR(MkdirAll(trimmed));
  if (trimmed == "/") trimmed.clear();  // PathOf adds the '/'
  return std::unique_ptr<LocalStore>(new LocalStore(std::move(trimmed), env));
}

absl::StatusOr<std::string> LocalStore::Get(const std::string& key,
                                            const std::string& if_version) {
  RETURN_IF_ERROR(ValidateKey(key));
  return GetRange(key, 0, UINT64_MAX, if_version);
}

absl::StatusOr<std::string> LocalStore::GetRange(const std::string& key, uint64_t offset,
                                                 uint64_t length,
                                                 const std::string& if_version) {
  RETURN_IF_ERROR(ValidateKey(key));
  const std::string path = PathOf(key);
  ASSIGN_OR_RETURN(const std::unique_ptr<ReadableFile> file, env_->OpenForRead(path));
  ASSIGN_OR_RETURN(const FileStat st, file->Stat());
  if (!st.is_regular) return NotARegularFile(path);
  // The version of the inode this file holds: a Put (rename) after this point creates
  // another inode and cannot change what the reads below see.
  if (!if_version.empty()) {
    const std::string found = LocalVersion(st);
    if (found != if_version) {
      return VersionMismatchError(absl::StrCat("object '", path, "'"), if_version, found);
    }
  }
  if (offset > st.size) {
    return absl::OutOfRangeError(absl::StrCat("offset ", offset, " is past the end of '",
                                              path, "' (", st.size, " bytes)"));
  }
  ASSIGN_OR_RETURN(std::string bytes, file->ReadAt(offset, std::min(length, st.size - offset)));
  if (!if_version.empty()) {
    // Someone wrote into the file in place (cp over it, not a rename) while we read:
    // its size or mtime moved, and the bytes may mix two versions.
    ASSIGN_OR_RETURN(const FileStat now, file->Stat());
    const std::string after = LocalVersion(now);
    if (after != if_version) {
      return VersionMismatchError(absl::StrCat("object '", path, "'"), if_version, after,
                                  "rewritten in place while it was read");
    }
  }
  return bytes;
}

absl::Status LocalStore::Put(const std::string& key, std::string_view bytes) {
  RETURN_IF_ERROR(ValidateKey(key));
  return env_->WriteFileAtomically(PathOf(key), bytes);
}

absl::StatusOr<std::vector<ObjectInfo>> LocalStore::List(const std::string& prefix) {
  std::vector<ObjectInfo> out;
  RETURN_IF_ERROR(Walk(env_, root_.empty() ? "/" : root_, "", prefix, &out));
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

absl::StatusOr<DirectoryListing> LocalStore::ListDirectory(const std::string& prefix) {
  DirectoryListing out;
  // prefix = key_dir + name_prefix; key_dir is "" or a valid key plus '/'.
  const size_t slash = prefix.rfind('/');
  std::string key_dir;
  std::string dir = root_.empty() ? "/" : root_;
  if (slash != std::string::npos) {
    const std::string dir_key = prefix.substr(0, slash);
    // No key has an empty, "." or ".." segment (and none starts with '/'), so nothing
    // matches; not opening it also keeps "../x" from leaving the root.
    if (!ValidateKey(dir_key).ok()) return out;
    key_dir = dir_key + "/";
    dir = PathOf(dir_key);
  }
  const absl::string_view name_prefix = absl::string_view(prefix).substr(key_dir.size());
  std::vector<std::string> names;
  RETURN_IF_ERROR(ReadNames(env_, dir, &names));
  for (const std::string& name : names) {
    if (!absl::StartsWith(name, name_prefix)) continue;
    const std::string path = dir + "/" + name;
    ASSIGN_OR_RETURN(const std::optional<FileStat> st, StatListed(env_, path));
    if (!st.has_value()) continue;
    const std::string key = key_dir + name;
    if (st->is_regular) {
      out.objects.push_back(InfoOf(key, *st));
    } else if (st->is_directory) {
      ASSIGN_OR_RETURN(bool holds_object, HoldsObject(env_, path));
      if (holds_object) out.common_prefixes.push_back(key + "/");
    }
  }
  std::sort(out.objects.begin(), out.objects.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  std::sort(out.common_prefixes.begin(), out.common_prefixes.end());
  return out;
}

absl::Status LocalStore::Delete(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  const absl::Status removed = env_->RemoveFile(PathOf(key));
  if (absl::IsNotFound(removed)) return absl::OkStatus();
  return removed;
}

absl::StatusOr<ObjectInfo> LocalStore::Head(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  const std::string path = PathOf(key);
  ASSIGN_OR_RETURN(const FileStat st, env_->Stat(path));
  if (!st.is_regular) return NotARegularFile(path);
  return InfoOf(key, st);
}

}  // namespace zephon::storage

#include "daemon/storage/local_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

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

// Closes the fd on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

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
std::string LocalVersion(const struct stat& st) {
  return absl::StrCat(st.st_size, "-",
                      absl::ToInt64Nanoseconds(absl::TimeFromTimespec(st.st_mtim) -
                                               absl::UnixEpoch()),
                      "-", st.st_ino);
}

absl::StatusOr<ObjectInfo> StatFile(const std::string& path, const std::string& key) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return PathError(errno, "cannot stat object", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("object path '", path, "' is not a regular file"));
  }
  ObjectInfo info;
  info.key = key;
  info.size = static_cast<uint64_t>(st.st_size);
  info.mtime = absl::TimeFromTimespec(st.st_mtim);
  info.version = LocalVersion(st);
  return info;
}

// Reads up to `length` bytes at `offset`; stops early only at end of file.
absl::StatusOr<std::string> ReadAt(int fd, const std::string& path, uint64_t offset,
                                   uint64_t length) {
  std::string out(length, '\0');
  uint64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, out.data() + done, length - done, offset + done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return PathError(errno, "cannot read object", path);
    }
    if (n == 0) break;
    done += static_cast<uint64_t>(n);
  }
  out.resize(done);
  return out;
}

// The entries of directory `dir` but ".", ".." and temp files, in readdir order. A
// missing directory (or a file) has none.
absl::Status ReadNames(const std::string& dir, std::vector<std::string>* names) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) return absl::OkStatus();
    return PathError(errno, "cannot list directory", dir);
  }
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    const absl::string_view name = e->d_name;
    if (name == "." || name == ".." || absl::StartsWith(name, kLocalTempPrefix)) continue;
    names->emplace_back(name);
  }
  const int read_errno = errno;
  ::closedir(d);
  if (read_errno != 0) return PathError(read_errno, "cannot list directory", dir);
  return absl::OkStatus();
}

// Whether List would find an object under directory `dir`: a regular file, not a temp
// file, at any depth. Stops at the first one.
absl::StatusOr<bool> HoldsObject(const std::string& dir) {
  std::vector<std::string> names;
  RETURN_IF_ERROR(ReadNames(dir, &names));
  std::vector<std::string> subdirs;
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;  // raced with a Delete
      return PathError(errno, "cannot stat", path);
    }
    if (S_ISREG(st.st_mode)) return true;
    if (S_ISDIR(st.st_mode)) subdirs.push_back(path);
  }
  for (const std::string& sub : subdirs) {  // this level's files before any subtree
    ASSIGN_OR_RETURN(bool found, HoldsObject(sub));
    if (found) return true;
  }
  return false;
}

// Appends every regular file under `dir` (key prefix `key_dir`, "" or ending in '/')
// whose key starts with `prefix`. Missing directories contribute nothing.
absl::Status Walk(const std::string& dir, const std::string& key_dir,
                  const std::string& prefix, std::vector<ObjectInfo>* out) {
  std::vector<std::string> names;
  RETURN_IF_ERROR(ReadNames(dir, &names));
  for (const std::string& name : names) {
    const std::string key = key_dir + name;
    const std::string path = dir + "/" + name;
    // Prune subtrees that cannot contain a match: key/ must be a prefix of `prefix`
    // or have `prefix` as its prefix.
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;  // raced with a Delete
      return PathError(errno, "cannot stat", path);
    }
    if (S_ISDIR(st.st_mode)) {
      const std::string sub = key + "/";
      if (absl::StartsWith(sub, prefix) || absl::StartsWith(prefix, sub)) {
        RETURN_IF_ERROR(Walk(path, sub, prefix, out));
      }
    } else if (S_ISREG(st.st_mode) && absl::StartsWith(key, prefix)) {
      out->push_back(ObjectInfo{key, static_cast<uint64_t>(st.st_size),
                                absl::TimeFromTimespec(st.st_mtim), LocalVersion(st)});
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
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return PathError(errno, "cannot open object", path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return PathError(errno, "cannot stat object", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("object path '", path, "' is not a regular file"));
  }
  // The version of the inode this fd holds: a Put (rename) after this point creates
  // another inode and cannot change what the preads below see.
  if (!if_version.empty()) {
    const std::string found = LocalVersion(st);
    if (found != if_version) {
      return VersionMismatchError(absl::StrCat("object '", path, "'"), if_version, found);
    }
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset > size) {
    return absl::OutOfRangeError(absl::StrCat("offset ", offset, " is past the end of '",
                                              path, "' (", size, " bytes)"));
  }
  ASSIGN_OR_RETURN(std::string bytes,
                   ReadAt(fd.get(), path, offset, std::min(length, size - offset)));
  if (!if_version.empty()) {
    // Someone wrote into the file in place (cp over it, not a rename) while we read:
    // its size or mtime moved, and the bytes may mix two versions.
    if (::fstat(fd.get(), &st) != 0) return PathError(errno, "cannot stat object", path);
    const std::string after = LocalVersion(st);
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
  RETURN_IF_ERROR(Walk(root_.empty() ? "/" : root_, "", prefix, &out));
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
  RETURN_IF_ERROR(ReadNames(dir, &names));
  for (const std::string& name : names) {
    if (!absl::StartsWith(name, name_prefix)) continue;
    const std::string path = dir + "/" + name;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;  // raced with a Delete
      return PathError(errno, "cannot stat", path);
    }
    const std::string key = key_dir + name;
    if (S_ISREG(st.st_mode)) {
      out.objects.push_back(ObjectInfo{key, static_cast<uint64_t>(st.st_size),
                                       absl::TimeFromTimespec(st.st_mtim), LocalVersion(st)});
    } else if (S_ISDIR(st.st_mode)) {
      ASSIGN_OR_RETURN(bool holds_object, HoldsObject(path));
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
  return StatFile(PathOf(key), key);
}

}  // namespace zephon::storage

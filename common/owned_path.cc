#include "common/owned_path.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace zephon {
namespace {

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

constexpr char kWhereFix[] =
    "use a directory only that uid can write (--socket, ZEPHON_SOCKET or XDG_RUNTIME_DIR)";

absl::Status ErrnoError(int err, const std::string& what) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, ": ", std::strerror(err)));
}

std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

absl::Status CheckPrivateDirStat(const std::string& path, const struct stat& st, uid_t uid) {
  if (S_ISLNK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "runtime directory ", path, " is a symlink: whoever can change it can redirect the "
        "daemon's socket, lock and log; point the socket at the real directory, or ",
        kWhereFix));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "runtime directory ", path, " is not a directory; remove it, or ", kWhereFix));
  }
  if (st.st_uid != uid) {
    return absl::FailedPreconditionError(absl::StrCat(
        "runtime directory ", path, " is owned by uid ", st.st_uid, ", not by uid ", uid,
        " that zephond runs as: that user could have planted symlinks for its lock or log. "
        "Remove the directory if you do not trust it (zephond recreates it 0700), or ",
        kWhereFix));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "runtime directory ", path, " is group- or world-writable (mode ",
        Octal(st.st_mode), "): others could plant symlinks for zephond's lock or log. Run "
        "`chmod go-w ", path, "` (0700, or 0750 with --shm-group), or ", kWhereFix));
  }
  return absl::OkStatus();
}

absl::Status CheckTrustedDirStat(const std::string& path, const struct stat& st, uid_t uid) {
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a directory"));
  }
  if (st.st_uid != 0 && st.st_uid != uid) {
    return absl::FailedPreconditionError(absl::StrCat(
        "directory ", path, " is owned by uid ", st.st_uid, " (neither root nor uid ", uid,
        " that zephond runs as), who could swap the files zephond writes below it; ",
        kWhereFix));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "directory ", path, " is group- or world-writable without the sticky bit (mode ",
        Octal(st.st_mode), "): others could rename what zephond writes below it. Run "
        "`chmod go-w ", path, "` (or `chmod +t` for a shared directory like /tmp), or ",
        kWhereFix));
  }
  return absl::OkStatus();
}

absl::Status CheckTrustedPath(const std::string& dir, uid_t uid) {
  char* resolved = ::realpath(dir.c_str(), nullptr);
  if (resolved == nullptr) return ErrnoError(errno, absl::StrCat("cannot resolve ", dir));
  std::string path(resolved);
  ::free(resolved);
  // Every prefix of the resolved path, from the directory itself up to "/".
  while (true) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return ErrnoError(errno, absl::StrCat("lstat ", path));
    if (absl::Status s = CheckTrustedDirStat(path, st, uid); !s.ok()) return s;
    if (path == "/") return absl::OkStatus();
    path = Parent(path);
  }
}

absl::Status EnsurePrivateDir(const std::string& dir, uid_t uid, mode_t mode,
                              std::optional<gid_t> group) {
  if (dir.empty()) return absl::InvalidArgumentError("empty runtime directory path");
  // Missing parents first (0755: they only need to be searchable), then the directory.
  for (size_t i = 1; i < dir.size(); ++i) {
    if (dir[i] != '/') continue;
    if (::mkdir(dir.substr(0, i).c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError(errno, absl::StrCat("cannot create directory ", dir.substr(0, i)));
    }
  }
  if (::mkdir(dir.c_str(), mode) == 0) {
    // Exactly `mode` whatever the umask; the group so --shm-group members reach the socket.
    if (group && ::chown(dir.c_str(), static_cast<uid_t>(-1), *group) != 0) {
      return ErrnoError(errno, absl::StrCat("cannot give runtime directory ", dir,
                                            " to group ", *group));
    }
    if (::chmod(dir.c_str(), mode) != 0) {
      return ErrnoError(errno, absl::StrCat("cannot chmod runtime directory ", dir));
    }
  } else if (errno != EEXIST) {
    return ErrnoError(errno, absl::StrCat("cannot create runtime directory ", dir));
  }
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return ErrnoError(errno, absl::StrCat("lstat ", dir));
  if (absl::Status s = CheckPrivateDirStat(dir, st, uid); !s.ok()) return s;
  // The directory itself passed the stricter check; everything above it must be trusted.
  char* resolved = ::realpath(dir.c_str(), nullptr);
  if (resolved == nullptr) return ErrnoError(errno, absl::StrCat("cannot resolve ", dir));
  const std::string real(resolved);
  ::free(resolved);
  if (real == "/") return absl::OkStatus();
  return CheckTrustedPath(Parent(real), uid);
}

absl::StatusOr<int> OpenOwnedFile(const std::string& path, int flags, mode_t mode, uid_t uid) {
  // O_NONBLOCK: a planted FIFO must fail the open (ENXIO), not block it; cleared below.
  const int fd =
      ::open(path.c_str(), flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is a symlink; zephond does not follow symlinks for files it writes. "
          "Remove it (someone may have planted it to make zephond overwrite its target)"));
    }
    return ErrnoError(err, absl::StrCat("cannot open ", path));
  }
  struct stat st;
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, absl::StrCat("fstat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    problem = "is not a regular file";
  } else if (st.st_uid != uid) {
    problem = absl::StrCat("is owned by uid ", st.st_uid, ", not by uid ", uid,
                           " that zephond runs as");
  } else if (st.st_nlink != 1) {
    problem = absl::StrCat("has ", st.st_nlink, " hard links (it may be another file's "
                           "link, planted to make zephond write into it)");
  }
  if (!problem.empty()) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        path, " ", problem, "; zephond writes only files it owns. Remove it, or choose "
        "another path"));
  }
  if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, absl::StrCat("fcntl ", path));
  }
  return fd;
}

}  // namespace zephon

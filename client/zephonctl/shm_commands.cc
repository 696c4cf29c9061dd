#include "client/zephonctl/shm_commands.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/zephonctl/exit_codes.h"
#include "client/zephonctl/output.h"
#include "common/paths.h"
#include "shm/segment.h"

namespace zephon::ctl {
namespace {

struct ShmArgs {
  std::string prefix;  // empty = DefaultShmPrefix(socket)
  std::string socket;  // empty = DefaultSocketPath()
  std::string shm_dir = shm::kDefaultShmDir;
  bool json = false;
};

enum class LockState { kFree, kHeld, kUnknown };

struct LockCheck {
  std::string path;
  LockState state = LockState::kUnknown;
  std::string detail;  // why kUnknown
};

// Takes and releases the daemon lock: held means a live zephond serves the socket.
// A missing lock file means no daemon ever started there (free).
LockCheck CheckLock(const std::string& socket) {
  LockCheck check;
  check.path = LockPathFor(socket);
  const int fd = open(check.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      check.state = LockState::kFree;
    } else {
      check.detail = absl::StrCat("cannot open ", check.path, ": ", std::strerror(errno));
    }
    return check;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
    flock(fd, LOCK_UN);
    check.state = LockState::kFree;
  } else if (errno == EWOULDBLOCK) {
    check.state = LockState::kHeld;
  } else {
    check.detail = absl::StrCat("flock ", check.path, ": ", std::strerror(errno));
  }
  close(fd);
  return check;
}

struct SegmentInfo {
  std::string name;  // without the leading slash
  uint64_t size_bytes = 0;
  mode_t mode = 0;
  std::string owner;
  int64_t creator_pid = 0;  // from "<prefix>.<pid>.<n>", 0 if the name has none
  bool creator_alive = false;  // a live zephond with that pid
};

bool IsLiveZephond(int64_t pid) {
  if (pid <= 0 || (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM)) return false;
  std::ifstream comm(absl::StrCat("/proc/", pid, "/comm"));
  std::string name;
  std::getline(comm, name);
  return absl::StrContains(name, "zephond");
}

std::string OwnerName(uid_t uid) {
  if (const passwd* pw = getpwuid(uid); pw != nullptr) return pw->pw_name;
  return absl::StrCat(uid);
}

// Segments of `prefix`: names "<prefix>.<anything>" (so "zephon.0.ab" never matches
// "zephon.0.abc.1.0"), sorted by name.
absl::StatusOr<std::vector<SegmentInfo>> ListSegments(const std::string& shm_dir,
                                                      const std::string& prefix) {
  DIR* dir = opendir(shm_dir.c_str());
  if (dir == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot list ", shm_dir, ": ", std::strerror(errno)));
  }
  std::vector<SegmentInfo> out;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (!absl::StartsWith(name, prefix + ".")) continue;
    SegmentInfo info;
    info.name = name;
    struct stat st {};
    if (stat(absl::StrCat(shm_dir, "/", name).c_str(), &st) == 0) {
      info.size_bytes = static_cast<uint64_t>(st.st_size);
      info.mode = st.st_mode & 07777;
      info.owner = OwnerName(st.st_uid);
    }
    const std::vector<std::string> parts =
        absl::StrSplit(name.substr(prefix.size() + 1), '.');
    if (!parts.empty() && absl::SimpleAtoi(parts[0], &info.creator_pid)) {
      info.creator_alive = IsLiveZephond(info.creator_pid);
    } else {
      info.creator_pid = 0;
    }
    out.push_back(std::move(info));
  }
  closedir(dir);
  std::sort(out.begin(), out.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.name < b.name; });
  return out;
}

struct RingInfo {
  std::string name;  // memfd name, e.g. "zephon.0.ab.1234.1" (data) or "....cursors"
  uint64_t size_bytes = 0;
};

// The live daemon's rings: memfds named "<prefix>.*" among the fds of `pid`.
// UNAVAILABLE when /proc/<pid>/fd cannot be read (another user's daemon).
absl::StatusOr<std::vector<RingInfo>> ListRings(int64_t pid, const std::string& prefix) {
  const std::string fd_dir = absl::StrCat("/proc/", pid, "/fd");
  DIR* dir = opendir(fd_dir.c_str());
  if (dir == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot list ", fd_dir, ": ", std::strerror(errno),
                                               " (run as zephond's user or root)"));
  }
  const std::string marker = absl::StrCat("/memfd:", prefix, ".");
  std::vector<RingInfo> out;
  while (const dirent* entry = readdir(dir)) {
    const std::string path = absl::StrCat(fd_dir, "/", entry->d_name);
    char target[512];
    const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    std::string link(target, static_cast<size_t>(n));
    if (!absl::StartsWith(link, marker)) continue;
    RingInfo info;
    info.name = link.substr(std::strlen("/memfd:"));
    if (absl::EndsWith(info.name, " (deleted)")) info.name.resize(info.name.size() - 10);
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) info.size_bytes = static_cast<uint64_t>(st.st_size);
    out.push_back(std::move(info));
  }
  closedir(dir);
  std::sort(out.begin(), out.end(),
            [](const RingInfo& a, const RingInfo& b) { return a.name < b.name; });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const RingInfo& a, const RingInfo& b) { return a.name == b.name; }),
            out.end());
  return out;
}

// The pid the daemon wrote into its lock file, or 0.
int64_t LockPid(const std::string& lock_path) {
  std::ifstream in(lock_path);
  int64_t pid = 0;
  in >> pid;
  return in ? pid : 0;
}

struct Resolved {
  std::string prefix;
  std::string socket;
};

Resolved Resolve(const ShmArgs& args) {
  Resolved r;
  r.socket = args.socket.empty() ? DefaultSocketPath() : args.socket;
  r.prefix = args.prefix.empty() ? DefaultShmPrefix(r.socket) : args.prefix;
  if (absl::StartsWith(r.prefix, "/")) r.prefix.erase(0, 1);
  return r;
}

const char* LockText(LockState state) {
  switch (state) {
    case LockState::kFree: return "free";
    case LockState::kHeld: return "held";
    case LockState::kUnknown: return "unknown";
  }
  return "unknown";
}

int RunLs(const ShmArgs& args) {
  const Resolved r = Resolve(args);
  absl::StatusOr<std::vector<SegmentInfo>> segments = ListSegments(args.shm_dir, r.prefix);
  if (!segments.ok()) {
    std::cerr << "zephonctl shm ls: " << segments.status().message() << "\n";
    return kExitFailed;
  }
  const LockCheck lock = CheckLock(r.socket);
  const int64_t daemon_pid = lock.state == LockState::kHeld ? LockPid(lock.path) : 0;
  absl::StatusOr<std::vector<RingInfo>> rings = std::vector<RingInfo>();
  if (daemon_pid > 0) rings = ListRings(daemon_pid, r.prefix);
  if (args.json) {
    std::vector<std::string> ring_items;
    if (rings.ok()) {
      for (const RingInfo& ring : *rings) {
        ring_items.push_back(absl::StrCat("{\"name\":", JsonQuote(ring.name),
                                          ",\"size_bytes\":", ring.size_bytes,
                                          ",\"pid\":", daemon_pid, "}"));
      }
    }
    std::vector<std::string> items;
    for (const SegmentInfo& s : *segments) {
      items.push_back(absl::StrCat(
          "{\"name\":", JsonQuote("/" + s.name), ",\"size_bytes\":", s.size_bytes,
          ",\"mode\":", JsonQuote(absl::StrFormat("%04o", s.mode)), ",\"owner\":",
          JsonQuote(s.owner), ",\"creator_pid\":", s.creator_pid,
          ",\"creator_alive\":", s.creator_alive ? "true" : "false", "}"));
    }
    std::cout << "{\"prefix\":" << JsonQuote(r.prefix) << ",\"socket\":" << JsonQuote(r.socket)
              << ",\"lock\":" << JsonQuote(LockText(lock.state))
              << ",\"daemon_live\":" << (lock.state == LockState::kHeld ? "true" : "false")
              << ",\"daemon_pid\":" << daemon_pid << ",\"rings_kind\":\"memfd\""
              << ",\"rings\":" << (rings.ok() ? "[" + absl::StrJoin(ring_items, ",") + "]" : "null")
              << ",\"rings_error\":" << JsonQuote(rings.ok() ? "" : std::string(rings.status().message()))
              << ",\"segments\":[" << absl::StrJoin(items, ",") << "]}\n";
    return kExitOk;
  }
  std::cout << "prefix " << r.prefix << "  socket " << r.socket << "\n";
  std::cout << "daemon lock " << lock.path << ": "
            << (lock.state == LockState::kHeld   ? "held by a live zephond"
                : lock.state == LockState::kFree ? "free (no live zephond)"
                                                 : "unknown (" + lock.detail + ")")
            << "\n";
  std::cout << "rings are sealed memfds (ring layout 2): no /dev/shm name, freed by the kernel "
               "when zephond and its readers let go, so they cannot leak\n";
  if (daemon_pid <= 0) {
    std::cout << "no live zephond: no rings\n";
  } else if (!rings.ok()) {
    std::cout << "rings of zephond pid " << daemon_pid << ": " << rings.status().message() << "\n";
  } else if (rings->empty()) {
    std::cout << "zephond pid " << daemon_pid << " holds no rings\n";
  } else {
    Table ring_table({"RING MEMFD", "SIZE", "HOLDER"});
    uint64_t ring_total = 0;
    for (const RingInfo& ring : *rings) {
      ring_total += ring.size_bytes;
      ring_table.AddRow({ring.name, HumanBytes(ring.size_bytes), absl::StrCat("zephond ", daemon_pid)});
    }
    ring_table.Print(std::cout);
    std::cout << rings->size() << " ring memfd(s), " << HumanBytes(ring_total) << "\n";
  }
  if (segments->empty()) {
    std::cout << "no legacy segments in " << args.shm_dir << "\n";
    return kExitOk;
  }
  std::cout << "legacy (layout 1) segments in " << args.shm_dir << ":\n";
  Table table({"SEGMENT", "SIZE", "MODE", "OWNER", "CREATOR"});
  uint64_t total = 0;
  for (const SegmentInfo& s : *segments) {
    total += s.size_bytes;
    table.AddRow({"/" + s.name, HumanBytes(s.size_bytes), absl::StrFormat("%04o", s.mode),
                  s.owner,
                  s.creator_pid == 0 ? "-"
                                     : absl::StrCat(s.creator_pid,
                                                    s.creator_alive ? " (live zephond)" : " (gone)")});
  }
  table.Print(std::cout);
  std::cout << segments->size() << " legacy segment(s), " << HumanBytes(total)
            << "; remove them with `zephonctl shm gc` once no old zephond runs\n";
  return kExitOk;
}

int RunGc(const ShmArgs& args) {
  const Resolved r = Resolve(args);
  const LockCheck lock = CheckLock(r.socket);
  if (lock.state == LockState::kHeld) {
    std::cerr << "zephonctl shm gc: refused: a live zephond holds " << lock.path
              << " and may own the legacy segments of prefix " << r.prefix
              << "; stop it first (its rings are memfds, freed when it exits)\n";
    return kExitRefused;
  }
  if (lock.state == LockState::kUnknown) {
    std::cerr << "zephonctl shm gc: refused: cannot tell whether a zephond is live ("
              << lock.detail << ")\n";
    return kExitRefused;
  }
  absl::StatusOr<std::vector<SegmentInfo>> segments = ListSegments(args.shm_dir, r.prefix);
  if (!segments.ok()) {
    std::cerr << "zephonctl shm gc: " << segments.status().message() << "\n";
    return kExitFailed;
  }
  for (const SegmentInfo& s : *segments) {
    if (s.creator_alive) {
      std::cerr << "zephonctl shm gc: refused: /" << s.name << " was created by zephond pid "
                << s.creator_pid << ", which is alive (its socket is not " << r.socket
                << "?); stop it or pass its --socket\n";
      return kExitRefused;
    }
  }
  int removed = 0;
  int failed = 0;
  for (const SegmentInfo& s : *segments) {
    const std::string path = absl::StrCat(args.shm_dir, "/", s.name);
    if (unlink(path.c_str()) == 0 || errno == ENOENT) {
      ++removed;
      std::cout << "removed /" << s.name << " (" << HumanBytes(s.size_bytes) << ")\n";
    } else {
      ++failed;
      std::cerr << "zephonctl shm gc: cannot remove /" << s.name << ": " << std::strerror(errno)
                << "\n";
    }
  }
  std::cout << "removed " << removed << " segment(s) of prefix " << r.prefix
            << " (legacy /dev/shm; memfd rings need no collection)\n";
  return failed == 0 ? kExitOk : kExitFailed;
}

void AddTargetOptions(CLI::App* command, ShmArgs* args) {
  command->add_option("--prefix", args->prefix,
                      "Segment name prefix (default: the socket's, zephon.<uid>.<hash>)");
  command->add_option("--socket", args->socket,
                      "zephond socket: its lock tells whether a live daemon owns the "
                      "segments (default: $ZEPHON_SOCKET, else " + DefaultSocketPath() + ")");
  command->add_option("--shm-dir", args->shm_dir, "Where legacy shm segments appear")
      ->capture_default_str();
}

}  // namespace

void AddShmCommands(CLI::App& app, int* exit_code) {
  CLI::App* shm = app.add_subcommand(
      "shm", "A zephond's shared memory: its memfd rings and legacy /dev/shm segments");
  shm->require_subcommand(1);

  auto ls_args = std::make_shared<ShmArgs>();
  CLI::App* ls = shm->add_subcommand(
      "ls", "The live daemon's ring memfds, legacy segments of the prefix (size, mode, "
            "owner), and whether a live daemon owns them");
  AddTargetOptions(ls, ls_args.get());
  ls->add_flag("--json", ls_args->json, "Print JSON");
  ls->callback([=] { *exit_code = RunLs(*ls_args); });

  auto gc_args = std::make_shared<ShmArgs>();
  CLI::App* gc = shm->add_subcommand(
      "gc", "Remove the prefix's legacy /dev/shm segments; refused (exit 3) while a live "
            "zephond may own them (memfd rings never need it)");
  AddTargetOptions(gc, gc_args.get());
  gc->callback([=] { *exit_code = RunGc(*gc_args); });
}

}  // namespace zephon::ctl

#include "tests/bench/ring/processes.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace zephon::shm::bench {
std::string BenchShmPrefix() { return absl::StrCat("zephon-bench.", getpid(), "."); }

std::string BenchShmName(absl::string_view tag) {
  static int counter = 0;
  return absl::StrCat(BenchShmPrefix(), tag, ".", counter++);
}

absl::StatusOr<pid_t> ForkChild(std::function<absl::Status()> body, ChildError* error) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid > 0) return pid;
  // Child.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(2);  // the parent died before prctl took effect
  const absl::Status s = body();
  if (!s.ok()) {
    const std::string text = s.ToString();
    std::strncpy(error->message, text.c_str(), sizeof(error->message) - 1);
    error->message[sizeof(error->message) - 1] = '\0';
  }
  _exit(s.ok() ? 0 : 1);  // never run the parent's destructors (they would close the ring)
}

absl::Status JoinChildren(std::vector<pid_t>& pids, const std::vector<ChildError*>& errors,
                          absl::Time deadline) {
  std::string failures;
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    pid_t got;
    while ((got = waitpid(pids[i], &status, WNOHANG)) == 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(2));
    }
    if (got == 0) {  // overstayed
      kill(pids[i], SIGKILL);
      waitpid(pids[i], &status, 0);
      absl::StrAppend(&failures, " reader ", i, " timed out;");
      continue;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    absl::StrAppend(&failures, " reader ", i, " ",
                    WIFSIGNALED(status) ? absl::StrCat("killed by signal ", WTERMSIG(status))
                                        : absl::StrCat("exited ", WEXITSTATUS(status)));
    if (i < errors.size() && errors[i]->message[0] != '\0') {
      absl::StrAppend(&failures, ": ", errors[i]->message);
    }
    failures += ";";
  }
  pids.clear();
  if (failures.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("reader processes failed:", failures));
}

void KillChildren(std::vector<pid_t>& pids) {
  for (pid_t pid : pids) kill(pid, SIGKILL);
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  pids.clear();
}

}  // namespace zephon::shm::bench

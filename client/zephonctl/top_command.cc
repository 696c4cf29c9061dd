#include "client/zephonctl/top_command.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/zephonctl/exit_codes.h"
#include "client/zephonctl/top_view.h"

namespace zephon::ctl {
namespace {

volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_resized = 0;

void OnStop(int) { g_stop = 1; }
void OnResize(int) { g_resized = 1; }

// Handlers for the duration of the view, without SA_RESTART so that poll() wakes up;
// the previous ones come back on destruction.
class SignalScope {
 public:
  SignalScope() {
    Install(SIGINT, OnStop, &old_int_);
    Install(SIGTERM, OnStop, &old_term_);
    Install(SIGWINCH, OnResize, &old_winch_);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGWINCH, &old_winch_, nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  static void Install(int sig, void (*handler)(int), struct sigaction* old) {
    struct sigaction sa {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, old);
  }
  struct sigaction old_int_ {}, old_term_ {}, old_winch_ {};
};

// The terminal in view mode (alternate screen, hidden cursor, keys without Enter or
// echo) until destroyed.
class TerminalScope {
 public:
  TerminalScope() {
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~(ICANON | ECHO);
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      restore_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    Write("\x1b[?1049h\x1b[?25l");
  }
  ~TerminalScope() {
    Write("\x1b[?25h\x1b[?1049l");
    if (restore_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  TerminalScope(const TerminalScope&) = delete;
  TerminalScope& operator=(const TerminalScope&) = delete;

  static void Write(const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = write(STDOUT_FILENO, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // the terminal went away: nothing left to show it on
      done += static_cast<size_t>(n);
    }
  }

 private:
  termios saved_{};
  bool restore_ = false;
};

struct Size {
  int columns = 80;
  int rows = 24;
};

Size TerminalSize() {
  Size size;
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    size.columns = ws.ws_col;
    size.rows = std::max<int>(ws.ws_row, 3);
  } else if (const char* c = std::getenv("COLUMNS"); c != nullptr && std::atoi(c) > 0) {
    size.columns = std::atoi(c);
  }
  return size;
}

bool ColourWanted(const TopOptions& options) {
  const char* term = std::getenv("TERM");
  return options.colour && std::getenv("NO_COLOR") == nullptr &&
         !(term != nullptr && std::string(term) == "dumb");
}

enum class Wake { kQuit, kTimeout, kResize };

// Waits up to `timeout` for a key. `stdin_open` goes false at end of input (stdin not a
// terminal, closed), after which only the timeout counts.
Wake WaitForKey(absl::Duration timeout, bool* stdin_open) {
  const absl::Time until = absl::Now() + timeout;
  while (!g_stop) {
    if (g_resized) return Wake::kResize;
    // Rounded up: a wait cut short by rounding would redraw without new figures.
    const int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(until - absl::Now(),
                                                            absl::Milliseconds(1)));
    if (ms <= 0) return Wake::kTimeout;
    pollfd pfd{STDIN_FILENO, POLLIN, 0};
    const int ready = poll(&pfd, *stdin_open ? 1 : 0, static_cast<int>(ms));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return Wake::kTimeout;
    }
    if (ready == 0) continue;  // the loop's clock decides
    char keys[64];
    const ssize_t n = read(STDIN_FILENO, keys, sizeof(keys));
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
      *stdin_open = false;
      continue;
    }
    for (ssize_t i = 0; i < n; ++i) {
      if (keys[i] == 'q' || keys[i] == 'Q' || keys[i] == 3 /* Ctrl-C without ISIG */) {
        return Wake::kQuit;
      }
    }
  }
  return Wake::kQuit;
}

int RunOnce(const StatusFetcher& fetch, const TopOptions& options) {
  const absl::StatusOr<proto::StatusReply> status = fetch();
  TopFrame frame;
  frame.status = status.ok() ? &*status : nullptr;
  frame.now = absl::Now();
  frame.target = options.target;
  if (!status.ok()) frame.error = std::string(status.status().message());
  TopStyle style;
  style.width = TerminalSize().columns;
  for (const std::string& line : RenderTopView(frame, style)) std::cout << line << "\n";
  std::cout.flush();
  return status.ok() ? kExitOk : ExitCodeFor(status.status());
}

}  // namespace

int RunTop(const StatusFetcher& fetch, const TopOptions& options) {
  if (options.once || !isatty(STDOUT_FILENO)) return RunOnce(fetch, options);
  g_stop = 0;
  g_resized = 0;
  SignalScope signals;
  TerminalScope terminal;
  const absl::Duration interval = absl::Seconds(std::max(0.05, options.interval_s));
  std::optional<proto::StatusReply> current, previous;
  absl::Time current_at, previous_at;
  std::string error;
  bool stdin_open = true;
  bool refetch = true;
  while (!g_stop) {
    if (refetch) {
      absl::StatusOr<proto::StatusReply> status = fetch();
      if (status.ok()) {
        previous = std::move(current);
        previous_at = current_at;
        current = *std::move(status);
        current_at = absl::Now();
        error.clear();
      } else {
        error = std::string(status.status().message());
        previous.reset();  // no CPU rate across a gap
      }
    }
    const Size size = TerminalSize();
    TopFrame frame;
    frame.status = current ? &*current : nullptr;
    frame.previous = previous ? &*previous : nullptr;
    frame.since_previous = current_at - previous_at;
    frame.now = absl::Now();
    frame.target = options.target;
    frame.error = error;
    TopStyle style;
    style.width = size.columns;
    style.colour = ColourWanted(options);
    std::vector<std::string> lines = RenderTopView(frame, style);
    if (static_cast<int>(lines.size()) > size.rows) {
      const size_t hidden = lines.size() - static_cast<size_t>(size.rows) + 1;
      lines.resize(static_cast<size_t>(size.rows) - 1);
      lines.push_back(absl::StrCat("... ", hidden, " more lines: enlarge the terminal")
                          .substr(0, static_cast<size_t>(std::max(20, size.columns))));
    }
    // Home, each line cleared to its end, the rest of the screen cleared: no flicker.
    TerminalScope::Write(absl::StrCat("\x1b[H", absl::StrJoin(lines, "\x1b[K\r\n"),
                                      "\x1b[K\x1b[J"));
    g_resized = 0;
    const Wake wake = WaitForKey(interval, &stdin_open);
    if (wake == Wake::kQuit) break;
    refetch = wake == Wake::kTimeout;  // a resize redraws at once, from the same figures
  }
  return kExitOk;
}

}  // namespace zephon::ctl

// `zephonctl top`: a live view of one node's zephond (top_view.h) that refreshes in
// place every interval until `q` (or Ctrl-C). On a terminal it takes the alternate
// screen and puts the keyboard in non-canonical mode, both restored on exit (signals
// included); without a terminal on stdout, or with --once, it prints one frame without
// escape codes and exits, which is what scripts and `watch` want.
//
// Thread-safety: RunTop runs on the calling thread; it installs SIGINT, SIGTERM and
// SIGWINCH handlers for its duration.
#ifndef ZEPHON_CLIENT_ZEPHONCTL_TOP_COMMAND_H_
#define ZEPHON_CLIENT_ZEPHONCTL_TOP_COMMAND_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/zephon.pb.h"

namespace zephon::ctl {

struct TopOptions {
  std::string target;       // shown in the title: the socket
  double interval_s = 1.0;  // between refreshes, > 0
  bool once = false;        // one frame, no escape codes
  bool colour = true;       // off also with $NO_COLOR set or TERM=dumb
};

// One Status call under its own deadline.
using StatusFetcher = std::function<absl::StatusOr<proto::StatusReply>()>;

// The exit code: 0 after `q`, a signal or one frame; with --once (or no terminal), the
// fetch's failure's exit code when zephond did not answer.
int RunTop(const StatusFetcher& fetch, const TopOptions& options);

}  // namespace zephon::ctl

#endif  // ZEPHON_CLIENT_ZEPHONCTL_TOP_COMMAND_H_

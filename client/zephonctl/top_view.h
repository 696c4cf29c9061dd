// The screen of `zephonctl top`: one node's zephond at a glance (daemon, checkpoint
// rounds, caches, S3, text conversions, then every instance with its ring fill bar and
// its readers' lag), rendered from two consecutive StatusReplies as plain lines of at
// most `width` columns. ASCII only ('#' bars), so it reads the same without colour, in
// any locale and over a serial console; colour (ANSI SGR) only marks, never carries,
// meaning.
//
// Thread-safety: pure functions.
#ifndef ZEPHON_CLIENT_ZEPHONCTL_TOP_VIEW_H_
#define ZEPHON_CLIENT_ZEPHONCTL_TOP_VIEW_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/zephon.pb.h"

namespace zephon::ctl {

struct TopFrame {
  // The newest status, and the one of the frame before (null on the first frame, or
  // after an error): CPU use is their difference.
  const proto::StatusReply* status = nullptr;
  const proto::StatusReply* previous = nullptr;
  absl::Duration since_previous;
  absl::Time now;
  std::string target;  // the socket or address shown in the title
  std::string error;   // the last Status call's failure ("" if it answered)
};

struct TopStyle {
  int width = 80;      // columns; lines are cut to it (minimum 20)
  bool colour = false;
};

// The screen's lines, without line terminators.
std::vector<std::string> RenderTopView(const TopFrame& frame, const TopStyle& style);

// "[#####.....]" of `width` columns (brackets included, >= 3) for `used` of `capacity`.
std::string FillBar(uint64_t used, uint64_t capacity, int width);

// "45 s", "3m05s", "2h03m", "4d02h".
std::string ShortDuration(absl::Duration d);

}  // namespace zephon::ctl

#endif  // ZEPHON_CLIENT_ZEPHONCTL_TOP_VIEW_H_

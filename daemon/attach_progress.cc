#include "daemon/attach_progress.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace zephon::daemon {

proto::AttachProgress DescribeAttachProgress(const AttachWork& start_work,
                                             const AttachWork& now_work,
                                             absl::Duration elapsed) {
  const pipeline::ConversionProgress::Snapshot& start = start_work.conversions;
  const pipeline::ConversionProgress::Snapshot& now = now_work.conversions;
  proto::AttachProgress p;
  const double seconds = absl::ToDoubleSeconds(elapsed);
  p.set_elapsed_s(seconds);
  p.set_tokenized_bytes(now.text_bytes);
  p.set_tokenized_files(now.files_done);
  p.set_converting_files(now.active);
  p.set_downloaded_bytes(now_work.downloaded_bytes);
  const double mb = static_cast<double>(now.text_bytes - start.text_bytes) / 1e6;
  const uint64_t files = now.files_done - start.files_done;
  const double downloaded_mb =
      static_cast<double>(now_work.downloaded_bytes -
                          std::min(start_work.downloaded_bytes, now_work.downloaded_bytes)) /
      1e6;
  if (now.active > 0) {
    p.set_activity(absl::StrFormat(
        "tokenizing text into the node's token cache (%s%s); since this attach began: %.1f "
        "MB of text, %d files done, %.1f MB/s; later attaches read the cache",
        now.current, now.active > 1 ? absl::StrFormat(" and %d more", now.active - 1) : "",
        mb, files, mb / std::max(seconds, 1e-9)));
  } else if (downloaded_mb > 0) {
    p.set_activity(absl::StrFormat(
        "downloading from the object store into the node's shard cache: %.1f MB since this "
        "attach began, %.1f MB/s; later attaches read the cache",
        downloaded_mb, downloaded_mb / std::max(seconds, 1e-9)));
  } else if (files > 0) {
    p.set_activity(absl::StrFormat(
        "tokenized %d files (%.1f MB of text) since this attach began; opening the pipeline",
        files, mb));
  } else {
    p.set_activity("opening the pipeline (tokenizer, datasets, DP-group peers)");
  }
  return p;
}

}  // namespace zephon::daemon

// The --log-file sink: an spdlog sink over a file zephond opened itself, with
// O_NOFOLLOW | O_APPEND | O_CREAT | O_CLOEXEC and the ownership checks of
// common/owned_path.h. spdlog's basic_file_sink opens with fopen, which follows a
// symlink planted at the log's path (a root daemon would append to its target).
//
// Each record is one write(2) on an O_APPEND fd, so lines from several processes
// appending to one file never interleave mid-line. Thread-safe (base_sink's mutex).
#ifndef ZEPHON_DAEMON_LOG_FILE_SINK_H_
#define ZEPHON_DAEMON_LOG_FILE_SINK_H_

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>

#include <spdlog/sinks/base_sink.h>

#include "absl/status/statusor.h"

namespace zephon::daemon {

class LogFileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  // Opens `path` for appending, creating it 0600 (and its missing directories
  // 0700, whatever the umask). Its
  // directory must be trusted (CheckTrustedPath) and the file, if it exists, a regular
  // file owned by this process's euid with one link. FAILED_PRECONDITION naming the
  // path and the fix; the errno's code when the file cannot be opened.
  static absl::StatusOr<std::shared_ptr<LogFileSink>> Open(const std::string& path);
  ~LogFileSink() override;
  LogFileSink(const LogFileSink&) = delete;
  LogFileSink& operator=(const LogFileSink&) = delete;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override {}  // write(2) goes straight to the file: nothing is buffered

 private:
  explicit LogFileSink(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_LOG_FILE_SINK_H_

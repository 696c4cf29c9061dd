// AttachProgressReporter: sends AttachProgress (attach_progress.h) on the streams of the
// attaches still at work, every `interval`. An attach runs on its RPC's own thread; one
// timer thread, shared by all, watches them. A quick attach (a running daemon, a corpus
// already in the token cache) is over before its first report is due and costs no
// thread at all: starting a reporting thread per attach added 1-2 ms to every attach on
// a 2-core node. An attach still at work when its first report is due gets a writer
// thread of its own then, so a client that stops reading (a blocked gRPC Write) holds
// up its own reports only.
//
// The timer thread starts with the first Report(). Where a thread cannot be started,
// the attaches concerned go on without progress reports (logged).
//
// Thread-safety: thread-safe. A Watch's writer is called from one thread, never twice at
// once, and never once its Watch is destroyed.
#ifndef ZEPHON_DAEMON_ATTACH_PROGRESS_REPORTER_H_
#define ZEPHON_DAEMON_ATTACH_PROGRESS_REPORTER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/attach_progress.h"
#include "daemon/pipeline/formats/conversion_progress.h"
#include "proto/zephon.pb.h"

namespace zephon::daemon {

class AttachProgressReporter {
 public:
  // Sends one message to the waiting client; false once the client stopped listening
  // (no more reports are sent to it).
  using Writer = std::function<bool(const proto::AttachServerMessage&)>;

  // The bytes the node's shard cache downloaded so far (thread-safe; called once per
  // report).
  using DownloadedBytes = std::function<uint64_t()>;

  // `conversions` (the node's text conversions the reports describe) must outlive the
  // reporter; `downloaded` may be null (no object-store downloads reported).
  explicit AttachProgressReporter(const pipeline::ConversionProgress* conversions,
                                  absl::Duration interval = kAttachProgressInterval,
                                  DownloadedBytes downloaded = nullptr);
  // REQUIRES: no Watch is alive. Stops and joins the thread.
  ~AttachProgressReporter();
  AttachProgressReporter(const AttachProgressReporter&) = delete;
  AttachProgressReporter& operator=(const AttachProgressReporter&) = delete;

  // Reports of one attach, from its Report() until it is destroyed. The destructor
  // waits for a report being written, so the stream is the caller's again once it
  // returns.
  class Watch {
   public:
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    friend class AttachProgressReporter;
    Watch(AttachProgressReporter* reporter, uint64_t id) : reporter_(reporter), id_(id) {}
    AttachProgressReporter* const reporter_;
    const uint64_t id_;  // 0: not reported (no thread)
  };

  // Starts reporting an attach that begins now: the first message is sent `interval`
  // from now if the Watch is still alive.
  [[nodiscard]] Watch Report(Writer writer) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One attach at work. Its fields are guarded by mu_ (an Attach lives in attaches_).
  struct Attach {
    Writer writer;
    absl::Time start;
    AttachWork at_start;
    bool handed_over = false;  // the timer gave it a writer thread (or failed to)
    bool done = false;         // its Watch is being destroyed
    std::thread thread;        // the writer thread, once handed over
  };

  void Forget(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // The timer thread: hands each attach whose first report is due to a writer thread.
  void Time() ABSL_LOCKS_EXCLUDED(mu_);
  // A writer thread: reports `attach` every interval_ until it is done or its client
  // stopped listening.
  void ReportUntilDone(Attach* attach) ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the timer thread if it is not running; false where none can be started.
  bool EnsureTimer() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The node's work now.
  AttachWork Work() const;

  const pipeline::ConversionProgress* const conversions_;
  const absl::Duration interval_;
  const DownloadedBytes downloaded_;
  absl::Mutex mu_;
  absl::CondVar changed_;  // an attach came or is done, or stopping_
  // unique_ptr: a writer thread holds its Attach's address.
  std::map<uint64_t, std::unique_ptr<Attach>> attaches_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool no_timer_ ABSL_GUARDED_BY(mu_) = false;  // its start failed: report nothing
  std::thread timer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_ATTACH_PROGRESS_REPORTER_H_

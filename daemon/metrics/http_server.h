// A tiny HTTP/1.1 server for /metrics, /healthz and /readyz (Boost.Beast, synchronous).
//
// One thread runs the accept loop; each connection is served to completion on it (read
// one request, write one response, close). Every wait is bounded: the accept loop polls
// every 100 ms for Stop(), and a connection gets 2 s to send its request and to take
// the response, so neither a slow client nor shutdown can hang the thread.
//
// Thread-safety: thread-safe. Create/Start/Stop from the owner; the handler runs on the
// server's thread and must be thread-safe with respect to the rest of the daemon.
#ifndef ZEPHON_DAEMON_METRICS_HTTP_SERVER_H_
#define ZEPHON_DAEMON_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace zephon::metrics {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Called with the request target (path and query) of every GET/HEAD.
using HttpHandler = std::function<HttpResponse(const std::string& target)>;

class MetricsServer {
 public:
  // Binds and listens on `address` ("host:port", "[v6]:port"; port 0 = any free port).
  // INVALID_ARGUMENT for a malformed address, UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Create(const std::string& address);
  ~MetricsServer();  // Stop()
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The bound "host:port" (the real port when 0 was asked).
  const std::string& address() const { return bound_; }
  // Starts the serving thread. REQUIRES: called at most once.
  void Start(HttpHandler handler);
  // Stops accepting and joins the thread (within about 100 ms plus one in-progress
  // connection's 2 s bound). Idempotent.
  void Stop();

 private:
  struct Impl;
  MetricsServer(std::unique_ptr<Impl> impl, std::string bound);
  void Loop(HttpHandler handler);

  const std::unique_ptr<Impl> impl_;
  const std::string bound_;
  std::atomic<bool> stop_{false};  // written by Stop(), read by the thread
  std::thread thread_;
};

}  // namespace zephon::metrics

#endif  // ZEPHON_DAEMON_METRICS_HTTP_SERVER_H_

// zephond's operations endpoint: the routes /metrics (Prometheus text), /healthz (the
// main loop is ticking) and /readyz (serving, not shutting down) served by MetricsServer.
//
// Thread-safety: Health is thread-safe (atomics: the main loop writes, scrapes read);
// RouteEndpoint is a pure function of its arguments; MetricsEndpoint as MetricsServer.
#ifndef ZEPHON_DAEMON_METRICS_ENDPOINT_H_
#define ZEPHON_DAEMON_METRICS_ENDPOINT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/metrics/counters.h"
#include "daemon/metrics/http_server.h"
#include "proto/zephon.pb.h"

namespace zephon::metrics {

// /healthz fails once the main loop's last tick is older than this.
inline constexpr int64_t kLoopStaleMs = 5000;

struct Health {
  // Steady-clock milliseconds of the main loop's last tick; 0 = not running.
  std::atomic<int64_t> loop_tick_ms{0};
  // Lock held, stale segments swept, gRPC listening, not shutting down.
  std::atomic<bool> ready{false};
};

// Milliseconds of the steady clock (the unit of Health::loop_tick_ms).
int64_t SteadyNowMs();

// The response to a GET of `target` (path and query). `status` is called only for
// /metrics. Unknown paths are 404 naming the three routes.
HttpResponse RouteEndpoint(const std::string& target,
                           const std::function<proto::StatusReply()>& status,
                           const DaemonCounters& counters, const Health& health,
                           int64_t now_ms);

// The bound server plus its routes.
class MetricsEndpoint {
 public:
  // Binds `address` (see MetricsServer::Create for its errors).
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Create(const std::string& address);

  const std::string& address() const { return server_->address(); }

  // Starts serving. `status`, `counters` and `health` must stay valid until Stop().
  // REQUIRES: called at most once.
  void Start(std::function<proto::StatusReply()> status, const DaemonCounters* counters,
             const Health* health);
  // Stops serving (see MetricsServer::Stop). Idempotent.
  void Stop() { server_->Stop(); }

 private:
  explicit MetricsEndpoint(std::unique_ptr<MetricsServer> server)
      : server_(std::move(server)) {}
  const std::unique_ptr<MetricsServer> server_;
};

}  // namespace zephon::metrics

#endif  // ZEPHON_DAEMON_METRICS_ENDPOINT_H_

#include "daemon/metrics/endpoint.h"

#include <chrono>
#include <utility>

#include "daemon/metrics/daemon_metrics.h"
#include "daemon/metrics/prometheus_text.h"

namespace zephon::metrics {

int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

HttpResponse RouteEndpoint(const std::string& target,
                           const std::function<proto::StatusReply()>& status,
                           const DaemonCounters& counters, const Health& health,
                           int64_t now_ms) {
  const std::string path = target.substr(0, target.find('?'));
  HttpResponse out;
  if (path == "/metrics") {
    out.content_type = "text/plain; version=0.0.4; charset=utf-8";
    out.body = RenderPrometheusText(
        CollectDaemonMetrics(status(), counters, ReadProcessStats()));
  } else if (path == "/healthz") {
    const int64_t tick = health.loop_tick_ms.load();
    const bool alive = tick > 0 && now_ms - tick < kLoopStaleMs;
    out.status = alive ? 200 : 503;
    out.body = alive ? "ok\n" : "main loop not running\n";
  } else if (path == "/readyz") {
    const bool ready = health.ready.load();
    out.status = ready ? 200 : 503;
    out.body = ready ? "ready\n" : "not ready\n";
  } else {
    out.status = 404;
    out.body = "not found: try /metrics, /healthz or /readyz\n";
  }
  return out;
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Create(
    const std::string& address) {
  absl::StatusOr<std::unique_ptr<MetricsServer>> server = MetricsServer::Create(address);
  if (!server.ok()) return server.status();
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(*std::move(server)));
}

void MetricsEndpoint::Start(std::function<proto::StatusReply()> status,
                            const DaemonCounters* counters, const Health* health) {
  server_->Start([status = std::move(status), counters, health](const std::string& target) {
    return RouteEndpoint(target, status, *counters, *health, SteadyNowMs());
  });
}

}  // namespace zephon::metrics

#include "daemon/metrics/http_server.h"

#include <poll.h>

#include <chrono>
#include <sstream>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/str_cat.h"

namespace zephon::metrics {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr int kAcceptPollMs = 100;
constexpr auto kConnectionBudget = std::chrono::seconds(2);
constexpr size_t kMaxRequestBytes = 16 * 1024;

// Waits for `events` on `fd` until `deadline`; false on timeout or error.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return false;
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, static_cast<int>(left.count())) > 0;
}

HttpResponse Respond(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

}  // namespace

struct MetricsServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
};

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Create(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-address='", address, "' is not host:port"));
  }
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  auto impl = std::make_unique<Impl>();
  boost::system::error_code ec;
  tcp::resolver resolver(impl->io);
  auto endpoints = resolver.resolve(host.empty() ? "0.0.0.0" : host, port,
                                    tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics-address='", address,
                                                   "': cannot resolve: ", ec.message()));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) impl->acceptor.non_blocking(true, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on --metrics-address=", address, ": ", ec.message()));
  }
  const tcp::endpoint bound_ep = impl->acceptor.local_endpoint(ec);
  const std::string bound_host = bound_ep.address().is_v6()
                                     ? absl::StrCat("[", bound_ep.address().to_string(), "]")
                                     : bound_ep.address().to_string();
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(impl), absl::StrCat(bound_host, ":", bound_ep.port())));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl, std::string bound)
    : impl_(std::move(impl)), bound_(std::move(bound)) {}

MetricsServer::~MetricsServer() { Stop(); }

void MetricsServer::Start(HttpHandler handler) {
  thread_ = std::thread([this, h = std::move(handler)] { Loop(h); });
}

void MetricsServer::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  boost::system::error_code ec;
  impl_->acceptor.close(ec);
}

void MetricsServer::Loop(HttpHandler handler) {
  const int listen_fd = impl_->acceptor.native_handle();
  while (!stop_.load()) {
    pollfd p{listen_fd, POLLIN, 0};
    if (::poll(&p, 1, kAcceptPollMs) <= 0) continue;
    boost::system::error_code ec;
    tcp::socket socket(impl_->io);
    impl_->acceptor.accept(socket, ec);
    if (ec) continue;  // would_block (a client gave up) or a transient accept error
    socket.non_blocking(true, ec);
    if (ec) continue;
    const int fd = socket.native_handle();
    const auto deadline = Clock::now() + kConnectionBudget;

    // Read the request head (no body is expected).
    std::string raw;
    char chunk[4096];
    while (raw.find("\r\n\r\n") == std::string::npos && raw.size() < kMaxRequestBytes &&
           !stop_.load()) {
      const size_t n = socket.read_some(asio::buffer(chunk), ec);
      if (ec == asio::error::would_block) {
        if (!WaitFor(fd, POLLIN, deadline)) break;
        continue;
      }
      if (ec) break;
      raw.append(chunk, n);
    }
    http::request_parser<http::empty_body> parser;
    parser.eager(true);
    boost::beast::error_code parse_ec;
    parser.put(asio::buffer(raw), parse_ec);
    HttpResponse out;
    bool head = false;
    unsigned version = 11;
    if (parse_ec || !parser.is_header_done()) {
      out = Respond(400, "bad request\n");
    } else {
      const auto& req = parser.get();
      version = req.version();
      head = req.method() == http::verb::head;
      if (req.method() != http::verb::get && !head) {
        out = Respond(405, "only GET and HEAD\n");
      } else {
        out = handler(std::string(req.target()));
      }
    }
    http::response<http::string_body> res{static_cast<http::status>(out.status), version};
    res.set(http::field::server, "zephond");
    res.set(http::field::content_type, out.content_type);
    res.set(http::field::connection, "close");
    res.body() = head ? std::string() : std::move(out.body);
    res.prepare_payload();
    if (head) res.content_length(out.body.size());
    std::ostringstream serialized;
    serialized << res;
    const std::string bytes = serialized.str();
    size_t sent = 0;
    while (sent < bytes.size()) {
      const size_t n = socket.write_some(asio::buffer(bytes.data() + sent, bytes.size() - sent), ec);
      if (ec == asio::error::would_block) {
        if (!WaitFor(fd, POLLOUT, deadline)) break;
        continue;
      }
      if (ec) break;
      sent += n;
    }
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }
}

}  // namespace zephon::metrics

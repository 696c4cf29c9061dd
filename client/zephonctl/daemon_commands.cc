#include "client/zephonctl/daemon_commands.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/connection.h"
#include "client/daemon_queries.h"
#include "client/zephonctl/exit_codes.h"
#include "client/zephonctl/output.h"
#include "client/zephonctl/top_command.h"
#include "common/file_io.h"
#include "common/paths.h"
#include "common/rpc_limits.h"
#include "daemon/checkpoint/peer_auth.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "proto/zephon.grpc.pb.h"

namespace zephon::ctl {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

absl::StatusOr<std::shared_ptr<grpc::Channel>> DialTcp(const DaemonTarget& target) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  const bool tls = !target.tls_ca.empty() || !target.tls_cert.empty() || !target.tls_key.empty();
  if (!tls) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    if (target.tls_cert.empty() != target.tls_key.empty()) {
      return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
    }
    grpc::SslCredentialsOptions ssl;
    auto read = [](const std::string& path, std::string* out) -> absl::Status {
      if (path.empty()) return absl::OkStatus();
      absl::StatusOr<std::string> bytes = ReadFile(path);
      if (!bytes.ok()) return bytes.status();
      *out = *std::move(bytes);
      return absl::OkStatus();
    };
    for (auto [path, out] : {std::pair{&target.tls_ca, &ssl.pem_root_certs},
                             std::pair{&target.tls_cert, &ssl.pem_cert_chain},
                             std::pair{&target.tls_key, &ssl.pem_private_key}}) {
      if (absl::Status s = read(*path, out); !s.ok()) return s;
    }
    credentials = grpc::SslCredentials(ssl);
  }
  auto channel = grpc::CreateCustomChannel(target.address, credentials, RpcChannelArguments());
  if (!channel->WaitForConnected(
          absl::ToChronoTime(absl::Now() + absl::Seconds(target.timeout_s)))) {
    return absl::UnavailableError(
        absl::StrCat("no zephond answers at ", target.address, " (within ", target.timeout_s,
                     " s)", tls ? "; check the address and the TLS files" : ""));
  }
  return channel;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const DaemonTarget& target) {
  if (!target.address.empty()) return DialTcp(target);
  client::ConnectOptions options;
  options.socket_path = target.socket;  // empty = DefaultSocketPath()
  options.timeout = absl::Seconds(target.timeout_s);
  return client::ConnectOrStart(options);  // never starts one: no zephond_path
}

// Scalar fields of `message` this build of zephonctl does not print by name (fields a
// newer zephond added), as "name value" pairs, so they still show up.
std::string ScalarText(const Message& message, const FieldDescriptor* field) {
  const auto* r = message.GetReflection();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return absl::StrCat(r->GetInt32(message, field));
    case FieldDescriptor::CPPTYPE_INT64: return absl::StrCat(r->GetInt64(message, field));
    case FieldDescriptor::CPPTYPE_UINT32: return absl::StrCat(r->GetUInt32(message, field));
    case FieldDescriptor::CPPTYPE_UINT64: return absl::StrCat(r->GetUInt64(message, field));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return absl::StrFormat("%.3g", r->GetDouble(message, field));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return absl::StrFormat("%.3g", r->GetFloat(message, field));
    case FieldDescriptor::CPPTYPE_BOOL: return r->GetBool(message, field) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_STRING: return r->GetString(message, field);
    case FieldDescriptor::CPPTYPE_ENUM: return r->GetEnum(message, field)->name();
    default: return "";
  }
}

// The named scalar field when this build's proto has it (fields added by a newer
// zephond are read by name, so zephonctl builds against either proto).
std::optional<std::string> NamedScalar(const Message& message, const std::string& name) {
  const FieldDescriptor* field = message.GetDescriptor()->FindFieldByName(name);
  if (field == nullptr || field->is_repeated() ||
      field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    return std::nullopt;
  }
  return ScalarText(message, field);
}

std::string ExtraFields(const Message& message, const std::set<std::string>& known) {
  std::vector<std::string> parts;
  const auto* descriptor = message.GetDescriptor();
  const auto* reflection = message.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (known.count(field->name()) || field->is_repeated() ||
        field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE ||
        (field->has_presence() && !reflection->HasField(message, field))) {
      continue;
    }
    parts.push_back(absl::StrCat(field->name(), " ", ScalarText(message, field)));
  }
  return absl::StrJoin(parts, "  ");
}

// Batches the slowest attached reader is behind the producer, and the fill of the ring.
struct RingUse {
  uint64_t fill = 0;     // produced - min released over live readers
  uint64_t max_lag = 0;  // same number: the lag of the slowest reader
  int live_readers = 0;
};

bool IsLive(const proto::ReaderStatus& reader) {
  return reader.state() == "attached" || reader.state() == "reserved";
}

RingUse RingUseOf(const proto::InstanceStatus& instance) {
  RingUse use;
  uint64_t min_released = instance.produced();
  for (const auto& reader : instance.readers()) {
    if (!IsLive(reader)) continue;
    ++use.live_readers;
    min_released = std::min(min_released, reader.released());
  }
  use.fill = instance.produced() - std::min(min_released, instance.produced());
  use.max_lag = use.fill;
  return use;
}

uint64_t Lag(const proto::InstanceStatus& instance, const proto::ReaderStatus& reader) {
  return instance.produced() > reader.released() ? instance.produced() - reader.released() : 0;
}

struct Totals {
  uint64_t ring_bytes = 0;
  uint32_t producer_threads = 0;
  uint32_t readers = 0;
};

Totals TotalsOf(const proto::StatusReply& reply) {
  Totals t;
  for (const auto& instance : reply.instances()) {
    t.ring_bytes += instance.ring_bytes();
    ++t.producer_threads;
    t.readers += RingUseOf(instance).live_readers;
  }
  return t;
}

std::string StatusJson(const proto::StatusReply& reply) {
  const Totals totals = TotalsOf(reply);
  std::vector<std::string> rings;
  for (const auto& instance : reply.instances()) {
    const RingUse use = RingUseOf(instance);
    std::vector<std::string> lags;
    for (const auto& reader : instance.readers()) {
      lags.push_back(absl::StrCat("{\"reader_index\":", reader.reader_index(),
                                  ",\"global_rank\":", reader.global_rank(),
                                  ",\"lag\":", Lag(instance, reader), "}"));
    }
    rings.push_back(absl::StrCat("{\"instance_id\":", JsonQuote(instance.instance_id()),
                                 ",\"ring_fill\":", use.fill,
                                 ",\"ring_slots\":", instance.ring_slots(),
                                 ",\"max_reader_lag\":", use.max_lag,
                                 ",\"live_readers\":", use.live_readers, ",\"reader_lag\":[",
                                 absl::StrJoin(lags, ","), "]}"));
  }
  return absl::StrCat("{\"status\":", ProtoToJson(reply), ",\"summary\":{\"instances\":[",
                      absl::StrJoin(rings, ","), "],\"ring_bytes_total\":", totals.ring_bytes,
                      ",\"threads_total\":", reply.worker_threads() + totals.producer_threads,
                      ",\"live_readers_total\":", totals.readers, "}}");
}

void PrintStatus(const proto::StatusReply& reply, std::ostream& out) {
  const Totals totals = TotalsOf(reply);
  out << absl::StrFormat("zephond pid %d  uptime %.1f s  cpu %.2f s  peak rss %s\n", reply.pid(),
                         reply.uptime_s(), reply.process_cpu_s(),
                         HumanBytes(reply.peak_rss_bytes()));
  out << "socket " << (reply.socket().empty() ? "-" : reply.socket()) << "  shm prefix " << reply.shm_prefix() << "\n";
  out << absl::StrFormat(
      "threads %d (%d workers + %d producers)  rings %d, %s  readers %d  instances created %d\n",
      reply.worker_threads() + totals.producer_threads, reply.worker_threads(),
      totals.producer_threads, reply.instances_size(), HumanBytes(totals.ring_bytes),
      totals.readers, reply.instances_created_total());
  if (reply.has_shard_cache()) {
    const proto::ShardCacheStatus& c = reply.shard_cache();
    const uint64_t lookups = c.hits() + c.misses();
    out << absl::StrFormat(
        "shard cache %s  %s of %s (%d entries, %s in use)  hits %d  misses %d (%.1f%% hit)  "
        "downloaded %s  evictions %d  errors %d\n",
        c.on_disk() ? c.dir() : (c.dir().empty() ? "memory only" : "not opened yet"),
        HumanBytes(c.resident_bytes()), HumanBytes(c.limit_bytes()), c.entries(),
        HumanBytes(c.pinned_bytes()), c.hits(), c.misses(),
        lookups == 0 ? 0.0 : 100.0 * static_cast<double>(c.hits()) / lookups,
        HumanBytes(c.bytes_downloaded()), c.evictions(), c.errors());
  }
  if (reply.has_token_cache()) {
    const proto::TokenCacheStatus& t = reply.token_cache();
    const uint64_t opens = t.hits() + t.misses();
    out << absl::StrFormat(
        "token cache %s  %s of %s (%d entries, %s in use%s)  hits %d  misses %d (%.1f%% hit)  "
        "evictions %d\n",
        t.dir().empty() ? "-" : t.dir(), HumanBytes(t.bytes()),
        t.budget_bytes() == 0 ? "no budget" : HumanBytes(t.budget_bytes()), t.entries(),
        HumanBytes(t.pinned_bytes()), t.over_budget() ? ", over budget" : "", t.hits(),
        t.misses(), opens == 0 ? 0.0 : 100.0 * static_cast<double>(t.hits()) / opens,
        t.evictions());
  }
  {
    const proto::CheckpointRoundsStatus& r = reply.checkpoint_rounds();
    out << absl::StrFormat("checkpoint rounds ok %d  error %d  timeout %d", r.ok(), r.error(),
                           r.timeout());
    if (r.has_last()) {
      out << absl::StrFormat("  last: run %s round %d %s at %s (%.1f s)%s",
                             r.last().run_id().empty() ? "-" : r.last().run_id(),
                             r.last().round(), r.last().result(),
                             FormatUnixMs(static_cast<int64_t>(r.last().finished_unix_s() * 1e3)),
                             r.last().seconds(),
                             r.last().error().empty() ? "" : absl::StrCat(": ", r.last().error()));
    }
    out << "\n";
  }
  if (const proto::ConversionStatus& c = reply.conversions(); c.active() > 0) {
    out << absl::StrFormat("tokenizing %d file(s) into the token cache: %s so far, %d done%s\n",
                           c.active(), HumanBytes(c.tokenized_bytes()), c.files_done(),
                           c.current().empty() ? "" : absl::StrCat(", now ", c.current()));
  }
  static const std::set<std::string> kKnownReply = {
      "pid", "socket", "shm_prefix", "instances_created_total", "uptime_s", "process_cpu_s",
      "peak_rss_bytes", "worker_threads", "start_time_unix_s"};
  if (std::string extra = ExtraFields(reply, kKnownReply); !extra.empty()) {
    out << extra << "\n";
  }
  if (reply.instances().empty()) {
    out << "no instances\n";
    return;
  }
  static const std::set<std::string> kKnownInstance = {
      "instance_id", "run_id", "dp_degree", "dp_group_id", "spec_hash", "ring_name",
      "ring_bytes", "ring_slots", "produced", "canonical_replicas", "released_per_s"};
  static const std::set<std::string> kKnownReader = {"reader_index", "global_rank",
                                                     "released", "state", "pid"};
  for (const auto& instance : reply.instances()) {
    const RingUse use = RingUseOf(instance);
    out << "\ninstance " << instance.instance_id() << "\n";
    out << absl::StrFormat("  run %s  dp group %d of %d  C %d  lanes [%s]  spec %s\n",
                           instance.run_id().empty() ? "-" : instance.run_id(),
                           instance.dp_group_id(), instance.dp_degree(),
                           instance.canonical_replicas(),
                           absl::StrJoin(instance.owned_lanes(), ","), instance.spec_hash());
    out << absl::StrFormat("  ring %s  %s  produced %d  fill %d/%d slots  max lag %d\n",
                           instance.ring_name(), HumanBytes(instance.ring_bytes()),
                           instance.produced(), use.fill, instance.ring_slots(), use.max_lag);
    if (std::optional<std::string> rate = NamedScalar(instance, "released_per_s")) {
      out << "  batches/s " << *rate << "\n";
    }
    if (std::string extra = ExtraFields(instance, kKnownInstance); !extra.empty()) {
      out << "  " << extra << "\n";
    }
    Table table({"READER", "RANK", "STATE", "RELEASED", "LAG", "PID", ""});
    for (const auto& reader : instance.readers()) {
      table.AddRow({absl::StrCat(reader.reader_index()), absl::StrCat(reader.global_rank()),
                    reader.state(), absl::StrCat(reader.released()),
                    absl::StrCat(Lag(instance, reader)), absl::StrCat(reader.pid()),
                    ExtraFields(reader, kKnownReader)});
    }
    if (table.empty()) {
      out << "  no readers\n";
    } else {
      table.Print(out, "  ");
    }
  }
}

// Status from a peer daemon's TCP service, the call signed with the cluster's secret and
// the answer checked to come from a daemon holding it.
absl::StatusOr<proto::StatusReply> SignedPeerStatus(const std::shared_ptr<grpc::Channel>& channel,
                                                    const DaemonTarget& target) {
  absl::StatusOr<std::shared_ptr<const checkpoint::PeerAuthenticator>> auth =
      checkpoint::PeerAuthenticator::FromFile(target.peer_secret_file);
  if (!auth.ok()) return auth.status();
  auto stub = proto::Zephon::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(target.timeout_s)));
  const proto::StatusRequest request;
  const std::string nonce = (*auth)->Sign(&context, checkpoint::kStatusMethod, request);
  proto::StatusReply reply;
  if (absl::Status s = client::FromGrpc(stub->Status(&context, request, &reply)); !s.ok()) {
    return s;
  }
  if (absl::Status s = (*auth)->VerifyReply(context, nonce, reply); !s.ok()) {
    return absl::UnauthenticatedError(absl::StrCat(target.address, ": ", s.message()));
  }
  return reply;
}

int RunStatus(const DaemonTarget& target, bool json) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Dial(target);
  if (!channel.ok()) {
    std::cerr << "zephonctl status: " << channel.status().message() << "\n";
    return ExitCodeFor(channel.status());
  }
  absl::StatusOr<proto::StatusReply> reply =
      target.peer_secret_file.empty()
          ? client::DaemonStatus(*channel, absl::Seconds(target.timeout_s))
          : SignedPeerStatus(*channel, target);
  if (!reply.ok()) {
    std::cerr << "zephonctl status: " << reply.status() << "\n";
    return ExitCodeFor(reply.status());
  }
  if (json) {
    std::cout << StatusJson(*reply) << "\n";
  } else {
    PrintStatus(*reply, std::cout);
  }
  return kExitOk;
}

int RunExplain(const DaemonTarget& target, const std::string& instance, bool json) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Dial(target);
  if (!channel.ok()) {
    std::cerr << "zephonctl explain: " << channel.status().message() << "\n";
    return ExitCodeFor(channel.status());
  }
  absl::StatusOr<std::string> text =
      client::Explain(*channel, instance, absl::Seconds(target.timeout_s));
  if (!text.ok()) {
    std::cerr << "zephonctl explain: " << text.status() << "\n";
    return ExitCodeFor(text.status());
  }
  if (json) {
    std::cout << "{\"instance_id\":" << JsonQuote(instance) << ",\"text\":" << JsonQuote(*text)
              << "}\n";
  } else {
    std::cout << *text;
    if (!text->empty() && text->back() != '\n') std::cout << "\n";
  }
  return kExitOk;
}

void AddSocketOptions(CLI::App* command, DaemonTarget* target) {
  command->add_option("--socket", target->socket,
                      "zephond's Unix socket (default: $ZEPHON_SOCKET, else " +
                          DefaultSocketPath() + ")");
  command->add_option("--timeout-s", target->timeout_s, "Deadline of the query")
      ->capture_default_str();
}

}  // namespace

void AddDaemonCommands(CLI::App& app, int* exit_code) {
  auto status_target = std::make_shared<DaemonTarget>();
  auto status_json = std::make_shared<bool>(false);
  CLI::App* status = app.add_subcommand(
      "status", "Instances, readers, ring fill and lag, threads and memory of a zephond");
  AddSocketOptions(status, status_target.get());
  CLI::Option* address = status->add_option(
      "--address", status_target->address,
      "host:port of a peer daemon's Status service (TCP) instead of the socket");
  status->get_option("--socket")->excludes(address);
  status->add_option("--tls-ca", status_target->tls_ca, "PEM CA bundle to verify --address")
      ->needs(address)
      ->check(CLI::ExistingFile);
  status->add_option("--tls-cert", status_target->tls_cert, "PEM client certificate (mTLS)")
      ->needs(address)
      ->check(CLI::ExistingFile);
  status->add_option("--tls-key", status_target->tls_key, "PEM client private key (mTLS)")
      ->needs(address)
      ->check(CLI::ExistingFile);
  status->add_option("--peer-secret-file", status_target->peer_secret_file,
                     "The cluster's shared secret (zephond --peer-secret-file): sign the "
                     "call to --address")
      ->needs(address);
  status->add_flag("--json", *status_json, "Print JSON (StatusReply plus a summary)");
  status->callback([=] { *exit_code = RunStatus(*status_target, *status_json); });

  auto top_target = std::make_shared<DaemonTarget>();
  auto top_options = std::make_shared<TopOptions>();
  auto top_no_colour = std::make_shared<bool>(false);
  CLI::App* top = app.add_subcommand(
      "top", "Live view of a node: instances, ranks and their lag, batches/s, ring fill, "
             "the last checkpoint round, caches (q quits)");
  AddSocketOptions(top, top_target.get());
  top->add_option("--interval-s", top_options->interval_s, "Seconds between refreshes")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  top->add_flag("--once", top_options->once,
                "Print one frame without escape codes and exit (also when stdout is not "
                "a terminal)");
  top->add_flag("--no-color", *top_no_colour, "No colour (also with $NO_COLOR or TERM=dumb)");
  top->callback([=] {
    TopOptions options = *top_options;
    options.colour = !*top_no_colour;
    const DaemonTarget target = *top_target;
    options.target = target.socket.empty() ? DefaultSocketPath() : target.socket;
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Dial(target);
    if (!channel.ok()) {
      std::cerr << "zephonctl top: " << channel.status().message() << "\n";
      *exit_code = ExitCodeFor(channel.status());
      return;
    }
    *exit_code = RunTop(
        [channel = *channel, timeout = absl::Seconds(target.timeout_s)] {
          return client::DaemonStatus(channel, timeout);
        },
        options);
  });

  auto explain_target = std::make_shared<DaemonTarget>();
  auto explain_instance = std::make_shared<std::string>();
  auto explain_json = std::make_shared<bool>(false);
  CLI::App* explain = app.add_subcommand(
      "explain", "How each instance runs: stages, operators, queues, ring, node totals");
  AddSocketOptions(explain, explain_target.get());
  explain->add_option("--instance", *explain_instance, "Instance id (default: all)");
  explain->add_flag("--json", *explain_json, "Print JSON {instance_id, text}");
  explain->callback(
      [=] { *exit_code = RunExplain(*explain_target, *explain_instance, *explain_json); });
}

}  // namespace zephon::ctl

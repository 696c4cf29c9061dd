#include "daemon/checkpoint/peer_service.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file_io.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "daemon/checkpoint/peer_auth.h"
#include "daemon/checkpoint/peer_credentials.h"
#include "daemon/checkpoint/aggregate_dir.h"
#include "daemon/checkpoint/round_aggregator.h"
#include "daemon/checkpoint/round_testing.h"
#include "common/fake_env.h"
#include "gtest/gtest.h"

namespace zephon::checkpoint {
namespace {

using testing::MakeReport;
using testing::MessageHas;
using testing::RunShape;
using testing::In;
using testing::Result;

std::string MakeTempDir() { return testing::MakeTempDir("peer"); }

// A leader: an aggregator served on 127.0.0.1:<free port>.
// It leads the runs passed to Lead() (the runs whose rank 0 attached to it).
class TestLeader {
 public:
  explicit TestLeader(std::shared_ptr<grpc::ServerCredentials> credentials =
                          grpc::InsecureServerCredentials(),
                      std::shared_ptr<const PeerAuthenticator> auth = nullptr)
      : service_(&aggregator_, PeerServiceOptions{std::move(auth), [this](const std::string& run) {
                   absl::MutexLock lock(&mu_);
                   auto it = runs_.find(run);
                   return it == runs_.end() ? std::nullopt : std::optional<LedRun>(it->second);
                 }}) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", std::move(credentials), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~TestLeader() { Stop(absl::ZeroDuration()); }

  bool started() const { return server_ != nullptr && port_ != 0; }
  // From now on this leader leads `shape`'s run, as its rank 0 attached with it.
  void Lead(const RunShape& shape) {
    absl::MutexLock lock(&mu_);
    runs_[shape.run_id] = LedRun{shape.world_size, shape.canonical_replicas(), "spec-hash-1",
                                 shape.aggregate_dir};
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  RoundAggregator& aggregator() { return aggregator_; }

  // The server goes away; calls in flight are cancelled after `grace`.
  void Stop(absl::Duration grace) {
    if (server_ == nullptr) return;
    server_->Shutdown(absl::ToChronoTime(In(grace)));
    server_.reset();
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, LedRun> runs_ ABSL_GUARDED_BY(mu_);
  RoundAggregator aggregator_;
  PeerService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

std::unique_ptr<PeerClient> Client(const std::string& address,
                                   std::shared_ptr<grpc::ChannelCredentials> creds = nullptr) {
  absl::StatusOr<std::unique_ptr<PeerClient>> client = PeerClient::Connect(address, creds);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// Each report from its own thread through its own client.
std::vector<Result> ReportAll(const std::string& address,
                              const std::vector<proto::CheckpointReport>& reports,
                              absl::Duration timeout = absl::Seconds(30)) {
  std::vector<Result> results(reports.size(), absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < reports.size(); ++i) {
    threads.emplace_back([&, i] {
      std::unique_ptr<PeerClient> client = Client(address);
      if (client != nullptr) results[i] = client->Report(reports[i], In(timeout));
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

void WaitPending(RoundAggregator& agg, size_t n) {
  const absl::Time until = In(absl::Seconds(10));
  while (agg.pending_rounds() != n && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(agg.pending_rounds(), n);
}

TEST(PeerServiceTest, ThreeDaemonsGetIdenticalBytesAndTheFileExists) {
  TestLeader leader;
  ASSERT_TRUE(leader.started());
  RunShape shape;
  shape.aggregate_dir = MakeTempDir();
  leader.Lead(shape);
  const std::vector<Result> results = ReportAll(
      leader.address(), {MakeReport(shape, "node-a", {0, 1}), MakeReport(shape, "node-b", {2, 3}),
                         MakeReport(shape, "node-c", {4, 5})});
  for (const Result& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->checkpoint(), results[0]->checkpoint());
  }
  const std::string path = CheckpointPath(shape.aggregate_dir, "run-1", 0);
  EXPECT_EQ(results[0]->path(), path);
  EXPECT_EQ(*ReadFile(path), results[0]->checkpoint());
  EXPECT_TRUE(DecodeCheckpoint(results[0]->checkpoint()).ok());
}

TEST(PeerServiceTest, MissingRankTimesOutForEveryCallerAndNoFileIsWritten) {
  TestLeader leader;
  ASSERT_TRUE(leader.started());
  RunShape shape;
  shape.aggregate_dir = MakeTempDir();
  shape.timeout_s = 0.5;
  leader.Lead(shape);
  const std::vector<Result> results = ReportAll(
      leader.address(), {MakeReport(shape, "node-a", {0, 1}), MakeReport(shape, "node-b", {2, 3}),
                         MakeReport(shape, "node-c", {4})});
  for (const Result& r : results) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_TRUE(MessageHas(r.status(),
                           "checkpoint round 0 of run run-1: timed out after 0.5 s waiting for "
                           "ranks [5] (did every rank call checkpoint() at the same step?)"));
  }
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(shape.aggregate_dir, "run-1", 0)));
}

TEST(PeerServiceTest, LeaderShutDownMidRoundGivesUnavailablePromptly) {
  TestLeader leader;
  ASSERT_TRUE(leader.started());
  RunShape shape;
  leader.Lead(shape);
  std::vector<Result> results;
  std::thread reporters([&] {
    results = ReportAll(leader.address(),
                        {MakeReport(shape, "node-a", {0, 1}), MakeReport(shape, "node-b", {2, 3})});
  });
  WaitPending(leader.aggregator(), 1);
  absl::SleepFor(absl::Milliseconds(100));  // both reports are in
  const absl::Time stop_at = absl::Now();
  // No aggregator Shutdown: the handlers are cancelled by the server going away.
  leader.Stop(absl::Milliseconds(100));
  reporters.join();
  EXPECT_LT(absl::Now() - stop_at, absl::Seconds(3));
  for (const Result& r : results) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_TRUE(MessageHas(r.status(), "leader zephond at " + leader.address() + " unreachable"));
  }
}

// The leader as a separate process, so a test can SIGKILL it: this binary re-run with
// --gtest_filter=PeerLeaderChild.Serve and kLeaderPortFileEnv set.
constexpr char kLeaderPortFileEnv[] = "ZEPHON_TEST_LEADER_PORT_FILE";

TEST(PeerLeaderChild, Serve) {
  const char* port_file = std::getenv(kLeaderPortFileEnv);
  if (port_file == nullptr) GTEST_SKIP() << "only runs as the child of LeaderKilledMidRound";
  TestLeader leader;
  leader.Lead(RunShape());
  ASSERT_TRUE(leader.started());
  ASSERT_TRUE(WriteFileAtomically(port_file, leader.address()).ok());
  // Killed by the parent; exits on its own if the parent died first.
  absl::SleepFor(absl::Seconds(60));
}

TEST(PeerServiceTest, LeaderKilledMidRoundGivesUnavailablePromptly) {
  const std::string port_file = MakeTempDir() + "/leader";
  const std::string env = absl::StrCat(kLeaderPortFileEnv, "=", port_file);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(const_cast<char*>(env.c_str()));
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  std::string filter = "--gtest_filter=PeerLeaderChild.Serve";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()), 0);
  absl::Cleanup reap = [pid] {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  };
  absl::StatusOr<std::string> address = absl::NotFoundError("not yet");
  for (const absl::Time until = In(absl::Seconds(20)); !address.ok() && absl::Now() < until;) {
    absl::SleepFor(absl::Milliseconds(20));
    address = ReadFile(port_file);
  }
  ASSERT_TRUE(address.ok()) << "the leader child did not start: " << address.status();

  RunShape shape;
  std::vector<Result> results;
  std::thread reporters([&] {
    results = ReportAll(*address,
                        {MakeReport(shape, "node-a", {0, 1}), MakeReport(shape, "node-b", {2, 3})});
  });
  absl::SleepFor(absl::Milliseconds(300));  // both calls are waiting in the child
  const absl::Time kill_at = absl::Now();
  std::move(reap).Invoke();  // SIGKILL, as a crashed or OOM-killed leader
  reporters.join();
  EXPECT_LT(absl::Now() - kill_at, absl::Seconds(3));
  for (const Result& r : results) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_TRUE(MessageHas(r.status(), "leader zephond at " + *address + " unreachable"));
  }
}

TEST(PeerServiceTest, AggregatorShutdownReachesRemoteCallers) {
  TestLeader leader;
  ASSERT_TRUE(leader.started());
  RunShape shape;
  leader.Lead(shape);
  Result result = absl::UnknownError("not run");
  std::thread reporter([&] {
    result = Client(leader.address())->Report(MakeReport(shape, "node-b", {2, 3}), In(absl::Seconds(30)));
  });
  WaitPending(leader.aggregator(), 1);
  leader.aggregator().Shutdown();
  reporter.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(MessageHas(result.status(), "shutting down"));
}

TEST(PeerServiceTest, NoLeaderListeningIsUnavailablePromptly) {
  std::string address;
  {
    TestLeader gone;
    ASSERT_TRUE(gone.started());
    address = gone.address();
  }
  const absl::Time start = absl::Now();
  const Result r = Client(address)->Report(MakeReport(RunShape(), "node-b", {2}), In(absl::Seconds(20)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(MessageHas(r.status(), "leader zephond at " + address + " unreachable"));
}

TEST(PeerServiceTest, ConnectRejectsBadAddresses) {
  EXPECT_EQ(PeerClient::Connect("", nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PeerClient::Connect("a b:1", nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- What the leader accepts from the wire ----

TEST(PeerServiceTest, ReportsForARunThisDaemonDoesNotLeadAreRefused) {
  TestLeader leader;
  ASSERT_TRUE(leader.started());
  RunShape shape;
  shape.aggregate_dir = MakeTempDir();
  // Nobody called Lead(): no rank 0 of run-1 attached here.
  const Result r = Client(leader.address())->Report(MakeReport(shape, "node-b", {2, 3}),
                                                    In(absl::Seconds(10)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_TRUE(MessageHas(r.status(), "does not lead that run"));
  EXPECT_EQ(leader.aggregator().pending_rounds(), 0u);
}

TEST(PeerServiceTest, TheLeaderNeverWritesWhereAReportSays) {
  TestLeader leader;
  ASSERT_TRUE(leader.started());
  RunShape shape;
  shape.aggregate_dir = MakeTempDir();
  leader.Lead(shape);
  RunShape forged = shape;
  forged.aggregate_dir = MakeTempDir() + "/attacker/chosen";
  const Result r = Client(leader.address())->Report(MakeReport(forged, "node-b", {2, 3}),
                                                    In(absl::Seconds(10)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_TRUE(MessageHas(r.status(), "aggregate_dir=" + forged.aggregate_dir));
  EXPECT_FALSE(std::filesystem::exists(forged.aggregate_dir));  // no mkdir -p either
  EXPECT_EQ(leader.aggregator().pending_rounds(), 0u);
}

TEST(PeerServiceTest, ReportsDisagreeingWithTheLedRunAreRefused) {
  TestLeader leader;
  ASSERT_TRUE(leader.started());
  RunShape shape;
  leader.Lead(shape);
  struct Case {
    const char* what;
    std::function<void(proto::CheckpointReport*)> mutate;
    const char* expect;
  };
  const Case cases[] = {
      {"world", [](proto::CheckpointReport* r) { r->set_world_size(60000); }, "world_size=60000"},
      {"lanes", [](proto::CheckpointReport* r) { r->set_canonical_replicas(7); },
       "canonical_replicas=7"},
      {"spec", [](proto::CheckpointReport* r) { r->set_spec_hash("other"); }, "spec_hash=other"},
      {"rank", [](proto::CheckpointReport* r) { r->mutable_ranks(0)->set_global_rank(6); },
       "global_rank 6 outside world_size 6"},
  };
  for (const Case& c : cases) {
    proto::CheckpointReport report = MakeReport(shape, "node-b", {2, 3});
    c.mutate(&report);
    const Result r = Client(leader.address())->Report(report, In(absl::Seconds(10)));
    EXPECT_FALSE(r.ok()) << c.what;
    EXPECT_TRUE(MessageHas(r.status(), c.expect)) << c.what << ": " << r.status();
  }
  EXPECT_EQ(leader.aggregator().pending_rounds(), 0u);
}

// ---- Shared-secret signatures ----

class PeerSecretTest : public ::testing::Test {
 protected:
  std::shared_ptr<const PeerAuthenticator> Auth(char fill) {
    return *PeerAuthenticator::FromSecret(std::string(40, fill));
  }
};

TEST_F(PeerSecretTest, SignedReportsCompleteAndTheAnswerIsSigned) {
  TestLeader leader(grpc::InsecureServerCredentials(), Auth('s'));
  ASSERT_TRUE(leader.started());
  RunShape shape;
  shape.world_size = 2;
  leader.Lead(shape);
  auto client = PeerClient::Connect(leader.address(), nullptr, Auth('s'));
  ASSERT_TRUE(client.ok());
  const Result r = (*client)->Report(MakeReport(shape, "node-b", {0, 1}), In(absl::Seconds(10)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(DecodeCheckpoint(r->checkpoint()).ok());
}

TEST_F(PeerSecretTest, UnsignedAndWronglySignedReportsAreRefused) {
  TestLeader leader(grpc::InsecureServerCredentials(), Auth('s'));
  ASSERT_TRUE(leader.started());
  RunShape shape;
  shape.world_size = 2;
  leader.Lead(shape);
  const Result unsigned_report =
      Client(leader.address())->Report(MakeReport(shape, "node-b", {0, 1}), In(absl::Seconds(10)));
  EXPECT_EQ(unsigned_report.status().code(), absl::StatusCode::kUnauthenticated)
      << unsigned_report.status();
  EXPECT_TRUE(MessageHas(unsigned_report.status(), "no x-zephon-auth signature"));
  auto wrong = PeerClient::Connect(leader.address(), nullptr, Auth('w'));
  const Result wrong_secret =
      (*wrong)->Report(MakeReport(shape, "node-b", {0, 1}), In(absl::Seconds(10)));
  EXPECT_EQ(wrong_secret.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(MessageHas(wrong_secret.status(), "wrong signature"));
  EXPECT_EQ(leader.aggregator().pending_rounds(), 0u);
}

TEST_F(PeerSecretTest, ReplayedAndStaleSignaturesAreRefused) {
  std::shared_ptr<const PeerAuthenticator> auth = Auth('s');
  TestLeader leader(grpc::InsecureServerCredentials(), auth);
  ASSERT_TRUE(leader.started());
  RunShape shape;
  shape.world_size = 2;
  shape.timeout_s = 0.3;
  leader.Lead(shape);
  auto channel = grpc::CreateChannel(leader.address(), grpc::InsecureChannelCredentials());
  auto stub = proto::ZephonPeer::NewStub(channel);
  const proto::CheckpointReport report = MakeReport(shape, "node-b", {0});
  auto send = [&](const std::string& header) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(In(absl::Seconds(10))));
    context.AddMetadata(kPeerAuthHeader, header);
    proto::CheckpointResult result;
    return stub->Report(&context, report, &result);
  };
  const std::string nonce(32, 'c');
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  // First use reaches the aggregator (and times out: rank 1 never reports).
  EXPECT_EQ(send(auth->HeaderFor(kReportMethod, report, now_ms, nonce)).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  const grpc::Status replay = send(auth->HeaderFor(kReportMethod, report, now_ms, nonce));
  EXPECT_EQ(replay.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(replay.error_message().find("replayed"), std::string::npos) << replay.error_message();
  const int64_t hour_ago = now_ms - 3600 * 1000;
  const grpc::Status stale =
      send(auth->HeaderFor(kReportMethod, report, hour_ago, std::string(32, 'd')));
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(stale.error_message().find("away from this daemon's clock"), std::string::npos)
      << stale.error_message();
}

TEST_F(PeerSecretTest, TheSkewWindowIsDecidedByTheEnvClocks) {
  const std::string secret(40, 's');
  FakeEnv leader_clock;  // both clocks start at the same instant
  FakeEnv client_clock;
  PeerAuthOptions on_leader;
  on_leader.env = &leader_clock;
  PeerAuthOptions on_client;
  on_client.env = &client_clock;
  TestLeader leader(grpc::InsecureServerCredentials(),
                    *PeerAuthenticator::FromSecret(secret, on_leader));
  ASSERT_TRUE(leader.started());
  RunShape shape;
  shape.world_size = 2;
  leader.Lead(shape);
  auto client =
      PeerClient::Connect(leader.address(), nullptr, *PeerAuthenticator::FromSecret(secret, on_client));
  ASSERT_TRUE(client.ok());
  const proto::CheckpointReport report = MakeReport(shape, "node-b", {0, 1});

  client_clock.Advance(absl::Minutes(6));  // signs 6 min ahead of the leader (max_skew 5)
  const Result ahead = (*client)->Report(report, In(absl::Seconds(10)));
  EXPECT_EQ(ahead.status().code(), absl::StatusCode::kUnauthenticated) << ahead.status();
  EXPECT_TRUE(MessageHas(ahead.status(), "6m away from this daemon's clock"));

  leader_clock.Advance(absl::Minutes(2));  // now 4 min apart: within the window
  const Result within = (*client)->Report(report, In(absl::Seconds(10)));
  EXPECT_TRUE(within.ok()) << within.status();
}

// ---- TLS ----

class PeerTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("openssl version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl CLI";
    dir_ = MakeTempDir();
    MakeCa("ca");
    MakeCert("ca", "server", "subjectAltName=IP:127.0.0.1,DNS:localhost");
    MakeCert("ca", "client", "subjectAltName=DNS:node-b");
    MakeCa("rogue-ca");
    MakeCert("rogue-ca", "rogue", "subjectAltName=DNS:rogue");
  }

  std::string File(const std::string& name) const { return dir_ + "/" + name; }

  void Run(const std::string& command) {
    const std::string full = absl::StrCat("cd '", dir_, "' && ", command, " > /dev/null 2>&1");
    ASSERT_EQ(std::system(full.c_str()), 0) << full;
  }
  void MakeCa(const std::string& name) {
    Run(absl::StrCat("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                     "-nodes -days 2 -subj /CN=", name, " -keyout ", name, ".key -out ", name,
                     ".pem"));
  }
  void MakeCert(const std::string& ca, const std::string& name, const std::string& san) {
    Run(absl::StrCat("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                     "-subj /CN=", name, " -keyout ", name, ".key -out ", name, ".csr"));
    ASSERT_TRUE(WriteFileAtomically(File(name + ".ext"), san + "\n").ok());
    Run(absl::StrCat("openssl x509 -req -in ", name, ".csr -CA ", ca, ".pem -CAkey ", ca,
                     ".key -CAcreateserial -days 2 -extfile ", name, ".ext -out ", name,
                     ".pem"));
  }

  PeerTlsOptions ServerOptions() const {
    return {File("server.pem"), File("server.key"), File("ca.pem")};
  }

  static RunShape TwoRankShape() {
    RunShape shape;
    shape.world_size = 2;
    return shape;
  }

  // Reports a complete 2-rank round (round `round`) through `creds`.
  Result ReportWith(const std::string& address, std::shared_ptr<grpc::ChannelCredentials> creds,
                    uint64_t round) {
    RunShape shape = TwoRankShape();
    shape.round = round;
    std::unique_ptr<PeerClient> client = Client(address, std::move(creds));
    return client->Report(MakeReport(shape, "node-b", {0, 1}), In(absl::Seconds(10)));
  }

  std::string dir_;
};

TEST_F(PeerTlsTest, MutualTlsAcceptsOnlyClientsWithACertificateFromTheCa) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> server_creds =
      ServerCredentials(ServerOptions());
  ASSERT_TRUE(server_creds.ok()) << server_creds.status();
  TestLeader leader(*server_creds);
  ASSERT_TRUE(leader.started());
  leader.Lead(TwoRankShape());

  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> good =
      ChannelCredentials({File("client.pem"), File("client.key"), File("ca.pem")});
  ASSERT_TRUE(good.ok()) << good.status();
  const Result ok = ReportWith(leader.address(), *good, 0);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(DecodeCheckpoint(ok->checkpoint()).ok());

  // Verifies the server, presents nothing.
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> no_cert =
      ChannelCredentials({"", "", File("ca.pem")});
  ASSERT_TRUE(no_cert.ok()) << no_cert.status();
  // A certificate from another CA.
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> rogue =
      ChannelCredentials({File("rogue.pem"), File("rogue.key"), File("ca.pem")});
  ASSERT_TRUE(rogue.ok()) << rogue.status();
  const std::pair<const char*, std::shared_ptr<grpc::ChannelCredentials>> refused[] = {
      {"no client certificate", *no_cert},
      {"certificate from another CA", *rogue},
      {"plaintext", grpc::InsecureChannelCredentials()},
  };
  uint64_t round = 1;
  for (const auto& [what, creds] : refused) {
    const absl::Time start = absl::Now();
    const Result r = ReportWith(leader.address(), creds, round++);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << what << ": " << r.status();
    EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << what;
  }
  EXPECT_EQ(leader.aggregator().pending_rounds(), 0u);  // nothing got through
}

TEST_F(PeerTlsTest, ServerOnlyTlsAcceptsClientsWithoutCertificates) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> server_creds =
      ServerCredentials({File("server.pem"), File("server.key"), ""});
  ASSERT_TRUE(server_creds.ok()) << server_creds.status();
  TestLeader leader(*server_creds);
  ASSERT_TRUE(leader.started());
  leader.Lead(TwoRankShape());
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> client =
      ChannelCredentials({"", "", File("ca.pem")});
  ASSERT_TRUE(client.ok()) << client.status();
  const Result r = ReportWith(leader.address(), *client, 0);
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(PeerCredentialsTest, BadOptionsAreClearErrors) {
  EXPECT_TRUE(ServerCredentials({}).ok());
  EXPECT_TRUE(ChannelCredentials({}).ok());
  const absl::Status missing = ServerCredentials({"/nonexistent/cert.pem", "/nonexistent/key.pem", ""}).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(MessageHas(missing, "--peer-tls-cert"));
  EXPECT_TRUE(MessageHas(missing, "/nonexistent/cert.pem"));
  EXPECT_EQ(ServerCredentials({"c.pem", "", ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ServerCredentials({"", "", "ca.pem"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChannelCredentials({"", "k.pem", ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/empty.pem", "").ok());
  EXPECT_TRUE(MessageHas(ChannelCredentials({"", "", dir + "/empty.pem"}).status(),
                         "not a PEM file"));
}

}  // namespace
}  // namespace zephon::checkpoint

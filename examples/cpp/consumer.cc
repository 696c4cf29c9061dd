// A C++ trainer-side consumer: attaches one rank to the node's zephond, reads batches
// zero-copy from the ring, checkpoints, and resumes from the checkpoint.
//
//   bazel-bin/examples/cpp/consumer --socket /run/zephon/zephond.sock --dataset /data/web \
//       --batches 8 --checkpoint /tmp/state.zckpt [--restore /tmp/state.zckpt]
//
// Prints one line per batch: "<lane> <lane batch index> <sha-like digest of tokens>".
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include <CLI/CLI.hpp>

#include "client/attached_reader.h"
#include "client/connection.h"
#include "common/mix.h"
#include "shm/ring_layout.h"

namespace {

zephon::proto::AttachRequest Request(const std::string& dataset, int64_t canonical_replicas) {
  zephon::proto::AttachRequest request;
  zephon::proto::PipelineSpec* spec = request.mutable_spec();
  zephon::proto::DatasetSpec* ds = spec->mutable_work_source()->add_datasets();
  ds->set_name("web");
  ds->set_path(dataset);
  ds->set_format("megatron");
  spec->mutable_work_source()->set_seed(7);
  spec->mutable_work_source()->set_chunk_size(32);
  spec->mutable_work_source()->set_exhausted_policy(zephon::proto::WorkSourceSpec::REPEAT);
  spec->add_operators()->mutable_pack_flat()->set_max_length(65);
  spec->add_operators()->mutable_batch()->set_microbatch_size(2);
  spec->set_canonical_replicas(canonical_replicas);
  request.set_ring_abi_major(zephon::shm::kLayoutMajor);
  return request;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Zephon C++ consumer example"};
  std::string socket, dataset, checkpoint_path, restore_path;
  int batches = 8;
  int64_t canonical_replicas = 2;
  app.add_option("--socket", socket, "zephond socket (default: ZEPHON_SOCKET or the default)");
  app.add_option("--dataset", dataset, "Megatron dataset directory or prefix")->required();
  app.add_option("--batches", batches, "Batches to read")->capture_default_str();
  app.add_option("--canonical-replicas", canonical_replicas)->capture_default_str();
  app.add_option("--checkpoint", checkpoint_path, "Write the checkpoint here after reading");
  app.add_option("--restore", restore_path, "Resume from this checkpoint file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  zephon::proto::AttachRequest request = Request(dataset, canonical_replicas);
  if (!restore_path.empty()) {
    std::ifstream in(restore_path, std::ios::binary);
    request.set_restore_checkpoint(std::string(std::istreambuf_iterator<char>(in), {}));
  }
  auto channel = zephon::client::ConnectOrStart({socket, /*zephond_path=*/""});
  if (!channel.ok()) {
    std::fprintf(stderr, "%s\n", channel.status().ToString().c_str());
    return 1;
  }
  auto reader =
      zephon::client::AttachedReader::Attach(*channel, request, absl::Seconds(30), socket);
  if (!reader.ok()) {
    std::fprintf(stderr, "attach: %s\n", reader.status().ToString().c_str());
    return 1;
  }
  for (int i = 0; i < batches; ++i) {
    absl::StatusOr<zephon::shm::SlotView> batch = (*reader)->Next(absl::Seconds(60));
    if (!batch.ok()) {
      std::fprintf(stderr, "next: %s\n", batch.status().ToString().c_str());
      return 1;
    }
    const zephon::shm::TensorView* tokens = batch->Find("tokens");  // int32 [rows, cols]
    const uint64_t digest = zephon::HashBytes(
        std::string_view(static_cast<const char*>(tokens->data), tokens->bytes));
    std::printf("%u %llu %016llx\n", batch->lane,
                static_cast<unsigned long long>(batch->lane_batch_index),
                static_cast<unsigned long long>(digest));
    if (absl::Status s = (*reader)->Release(batch->seq); !s.ok()) {
      std::fprintf(stderr, "release: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  if (!checkpoint_path.empty()) {
    absl::StatusOr<std::string> state = (*reader)->Checkpoint(absl::Seconds(60));
    if (!state.ok()) {
      std::fprintf(stderr, "checkpoint: %s\n", state.status().ToString().c_str());
      return 1;
    }
    std::ofstream(checkpoint_path, std::ios::binary) << *state;
  }
  return 0;
}

// Message size limits of every gRPC channel and server in Zephon: the daemon's Unix
// socket server, its peer server, the client library's channel, the daemon's channel to a
// run's leader (PeerClient) and zephonctl's channels. Builders take these from here only,
// so a client and a server can never disagree on what fits.
//
// Why so large: gRPC's default receive limit is 4 MiB, but a merged checkpoint holds one
// RankProgress per rank and one LaneProgress per lane, and it travels whole in the
// Checkpoint reply, in a follower's Report and reply, and (with the spec once more) in a
// restoring AttachRequest. A world of 60,000 ranks made 5.25 MB and failed.
// Sizing for the largest world allowed, 2^20 ranks and 2^20 lanes (kMaxWorldRanks), in
// protobuf's encoding:
//   RankProgress: four varint fields <= 4+4+4+11 bytes, two strings (instance_id,
//     daemon) with 3-byte tags/lengths, 3 bytes of framing: 32 bytes plus the
//     strings (a daemon label is a socket path or host:port, <= 108 bytes; instance_id is
//     the run key and spec hash, ~100 bytes): about 250 bytes, 256 MiB for 2^20 ranks.
//   LaneProgress: lane (4) and three u64 (11 each) plus framing (3): <= 40 bytes,
//     40 MiB for 2^20 lanes.
//   Spec: the pipeline spec, twice in a restoring attach; a few KiB in practice.
// That is about 300 MiB; 1 GiB leaves over 3x for longer run ids and labels and stays
// below gRPC's hard ceiling (INT_MAX). daemon/checkpoint/large_messages_test.cc checks a
// worst-case checkpoint against it. A message over the limit fails with
// RESOURCE_EXHAUSTED naming both sizes.
// Thread-safety: constants and pure functions.
#ifndef ZEPHON_COMMON_RPC_LIMITS_H_
#define ZEPHON_COMMON_RPC_LIMITS_H_

#include <grpcpp/grpcpp.h>

#include <climits>
#include <cstdint>

#include "common/run_limits.h"

namespace zephon {

// The largest world_size and canonical_replicas the limits are sized for: 8x (ranks) and
// 16x (lanes) the bounds attach enforces (common/run_limits.h), so the limits hold with
// room to raise those bounds.
inline constexpr uint64_t kMaxWorldRanks = uint64_t{1} << 20;
static_assert(kMaxWorldSize <= static_cast<int64_t>(kMaxWorldRanks) &&
                  kMaxCanonicalReplicas <= static_cast<int64_t>(kMaxWorldRanks),
              "the message limits must be sized for the largest run attach accepts");

// Largest message any Zephon channel or server sends or receives.
inline constexpr int kMaxRpcMessageBytes = 1 << 30;
static_assert(kMaxRpcMessageBytes <= INT_MAX, "gRPC takes the limit as an int");

// Channel arguments carrying the send and receive limits; callers add their own args.
inline grpc::ChannelArguments RpcChannelArguments() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxRpcMessageBytes);
  args.SetMaxSendMessageSize(kMaxRpcMessageBytes);
  return args;
}

// Sets the send and receive limits of a server being built. REQUIRES: builder != nullptr.
inline void ApplyRpcMessageLimits(grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(kMaxRpcMessageBytes);
  builder->SetMaxSendMessageSize(kMaxRpcMessageBytes);
}

// What the peer server (--peer-address, reachable over the network) accepts in one call.
// gRPC reads and parses a request before the handler can check its signature, so this is
// what an unauthenticated caller can make the daemon hold per call: keep it to what a
// follower's Report needs, its own ranks and lanes plus the spec. Even a follower hosting
// every lane of the largest run and kMaxWorldSize / 4 ranks stays below 64 MiB (about 2.6
// MB of lanes and 8 MB of ranks at ~250 bytes each). Answers (the whole checkpoint) may
// be as large as any message.
inline constexpr int kMaxPeerRequestBytes = 64 << 20;
static_assert(kMaxCanonicalReplicas * 40 + (kMaxWorldSize / 4) * 250 + (1 << 20) <
                  kMaxPeerRequestBytes,
              "a follower's report of the largest run must fit the peer server's limit");

// The limits of the peer server: small requests, answers as large as any message.
inline void ApplyPeerServerLimits(grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(kMaxPeerRequestBytes);
  builder->SetMaxSendMessageSize(kMaxRpcMessageBytes);
}

}  // namespace zephon

#endif  // ZEPHON_COMMON_RPC_LIMITS_H_

// Why a read timed out: which DP-group peer holds the ring.
//
// All ranks of a DP group on a node read one ring, and the producer can reuse a slot
// only after every reader released it; one stopped rank (SIGSTOP, a hang, a rank that
// stopped iterating) therefore blocks its peers, whose reads fail with
// DEADLINE_EXCEEDED after read_timeout_s. The daemon knows each reader's lag (its
// Status RPC); DescribeStall turns that into a sentence naming the lagging rank(s), so
// the error a blocked rank sees names the rank to look at. Pure function; thread-safe.
#ifndef ZEPHON_CLIENT_STALL_DIAGNOSIS_H_
#define ZEPHON_CLIENT_STALL_DIAGNOSIS_H_

#include <cstdint>
#include <string>

#include "proto/zephon.pb.h"

namespace zephon::client {

// One sentence about `instance` from the point of view of reader `own_reader_index`:
// the other gating readers (attached or reserved) whose lag fills the ring
// (lag >= ring_slots), by global_rank, pid and lag; or, when none does, that no peer
// holds the ring and the producer itself has not made the next batch.
std::string DescribeStall(const proto::InstanceStatus& instance, uint32_t own_reader_index);

}  // namespace zephon::client

#endif  // ZEPHON_CLIENT_STALL_DIAGNOSIS_H_

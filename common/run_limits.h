// The largest run zephond accepts: one constant per bound, used wherever the bound is
// checked or sized for (attach validation, lane setup, checkpoint message limits).
//
// kMaxCanonicalReplicas (C, the number of lanes). Each lane costs the daemon its own
// stream state (pack leftovers, shuffle buffer, chunk cursor) and setting one up costs a
// lane-routing permutation of C entries, so time to the first batch grows with C (100,000
// lanes took 50 s with a core pegged). 65,536 lanes is above any data-parallel degree
// run today (it is a bound on dp_degree too) and keeps a merged checkpoint's lane table
// near 1.3 MB (about 20 bytes per lane).
//
// kMaxWorldSize (ranks calling checkpoint() together). A merged checkpoint carries one
// RankProgress per rank (about 90 bytes with a typical instance id and daemon name, up to
// ~250 with long ones), so 131,072 ranks make a checkpoint of about 12-33 MB plus the
// lane table: the gRPC message limits (common/rpc_limits.h) are sized from these.
//
// Both are far below 2^32, so every value that passes these bounds fits the uint32
// fields of the checkpoint and the ring; values are validated as int64 before any
// narrowing (daemon/identity.cc), never truncated.
#ifndef ZEPHON_COMMON_RUN_LIMITS_H_
#define ZEPHON_COMMON_RUN_LIMITS_H_

#include <cstdint>

namespace zephon {

inline constexpr int64_t kMaxCanonicalReplicas = 65'536;
inline constexpr int64_t kMaxWorldSize = 131'072;

static_assert(kMaxCanonicalReplicas <= INT32_MAX && kMaxWorldSize <= INT32_MAX,
              "run bounds must fit the uint32 fields of checkpoints and rings");

}  // namespace zephon

#endif  // ZEPHON_COMMON_RUN_LIMITS_H_

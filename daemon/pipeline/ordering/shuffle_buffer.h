// BufferShuffle: the deterministic `shuffle(buffer_size, seed)` operator.
//
// Applied to the sample ids of one flush group of one lane (operator state never
// crosses a flush group, which keeps lane positions tiny). With
// key = Combine(Combine(seed, lane), flush_group_first_chunk) and a counter i
// starting at 0 in each group:
//   * streaming: each input is appended while the buffer holds < buffer_size items;
//     once full, each new input evicts buffer[r], r = Combine(key, i++) % buffer_size,
//     which is emitted, and the input takes its place;
//   * draining (group end): while non-empty, r = Combine(key, i++) % size; emit
//     buffer[r]; buffer[r] = last; pop the last.
// Pure function; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_ORDERING_SHUFFLE_BUFFER_H_
#define ZEPHON_DAEMON_PIPELINE_ORDERING_SHUFFLE_BUFFER_H_

#include <cstdint>
#include <vector>

#include "daemon/pipeline/sample_id.h"

namespace zephon::pipeline {

uint64_t ShuffleKey(uint64_t seed, uint32_t lane, uint64_t flush_group_first_chunk);

// Reorders *items in place. REQUIRES: buffer_size >= 1.
void BufferShuffle(uint64_t buffer_size, uint64_t key, std::vector<SampleId>* items);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_ORDERING_SHUFFLE_BUFFER_H_

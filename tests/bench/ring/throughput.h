// File: tests/bench/ring/throughput.h
//
// Delivery throughput: one producer publishing batches of `payload_bytes` to N forked
// reader processes through the ring. The producer fills each slot's payload once (so the
// pages are real) and afterwards writes only the small tensor table and a "meta" tensor
// per batch: collating is not transport. Each reader acquires, sums every 64-bit word
// of the payload (a trainer's first pass), checks the sum, releases.
#ifndef ZEPHON_TESTS_BENCH_RING_THROUGHPUT_H_
#define ZEPHON_TESTS_BENCH_RING_THROUGHPUT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zephon::shm::bench {

struct ThroughputConfig {
  uint64_t payload_bytes = 0;
  int readers = 1;
  uint32_t slot_count = 8;
  absl::Duration duration;  // the producer stops after this or max_batches
  uint64_t max_batches = 0;
};

struct ThroughputResult {
  ThroughputConfig config;
  uint64_t batches_per_reader = 0;  // timed batches (after warm-up), mean over readers
  double batches_per_s = 0;         // per reader, mean
  double reader_gbps = 0;           // per reader, mean (1e9 B/s)
  double min_reader_gbps = 0;       // slowest reader
  double aggregate_gbps = 0;        // all readers' bytes over the union of their windows
  uint64_t sum_mismatches = 0;      // batches whose payload sum was wrong (must be 0)
  // Why the figures are what they are: how often a reader parked in FUTEX_WAIT (its
  // voluntary context switches per timed batch), and the fraction of releases that
  // found the producer asleep on a full ring and had to FUTEX_WAKE it.
  double reader_parks_per_batch = 0;
  double producer_wakes_per_release = 0;
};

absl::StatusOr<ThroughputResult> RunThroughput(const ThroughputConfig& config);

}  // namespace zephon::shm::bench

#endif  // ZEPHON_TESTS_BENCH_RING_THROUGHPUT_H_

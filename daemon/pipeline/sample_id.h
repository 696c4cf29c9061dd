// SampleId: the stable name of one sample (a document / sequence) in a work source.
//
// `dataset` is the index of the dataset in WorkSourceSpec.datasets, `shard` the index of
// the shard inside that dataset (shards sorted by file name), `index` the sample's index
// inside the shard. Plain value type; thread-compatible.
#ifndef ZEPHON_DAEMON_PIPELINE_SAMPLE_ID_H_
#define ZEPHON_DAEMON_PIPELINE_SAMPLE_ID_H_

#include <cstdint>
#include <ostream>
#include <tuple>

#include "common/mix.h"

namespace zephon::pipeline {

struct SampleId {
  uint32_t dataset = 0;
  uint32_t shard = 0;
  uint64_t index = 0;

  friend bool operator==(const SampleId& a, const SampleId& b) {
    return a.dataset == b.dataset && a.shard == b.shard && a.index == b.index;
  }
  friend bool operator!=(const SampleId& a, const SampleId& b) { return !(a == b); }
  friend bool operator<(const SampleId& a, const SampleId& b) {
    return std::tie(a.dataset, a.shard, a.index) < std::tie(b.dataset, b.shard, b.index);
  }
  friend std::ostream& operator<<(std::ostream& os, const SampleId& id) {
    return os << "{" << id.dataset << "," << id.shard << "," << id.index << "}";
  }
};

// For unordered containers keyed by SampleId.
struct SampleIdHash {
  size_t operator()(const SampleId& id) const {
    return Combine(Combine(id.dataset, id.shard), id.index);
  }
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_SAMPLE_ID_H_

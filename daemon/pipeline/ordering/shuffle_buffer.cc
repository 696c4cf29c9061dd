#include "daemon/pipeline/ordering/shuffle_buffer.h"

#include "common/mix.h"

namespace zephon::pipeline {

uint64_t ShuffleKey(uint64_t seed, uint32_t lane, uint64_t flush_group_first_chunk) {
  return Combine(Combine(seed, lane), flush_group_first_chunk);
}

void BufferShuffle(uint64_t buffer_size, uint64_t key, std::vector<SampleId>* items) {
  std::vector<SampleId> out, buffer;
  out.reserve(items->size());
  uint64_t counter = 0;
  for (const SampleId& id : *items) {
    if (buffer.size() < buffer_size) {
      buffer.push_back(id);
      continue;
    }
    const uint64_t r = Combine(key, counter++) % buffer_size;
    out.push_back(buffer[r]);
    buffer[r] = id;
  }
  while (!buffer.empty()) {
    const uint64_t r = Combine(key, counter++) % buffer.size();
    out.push_back(buffer[r]);
    buffer[r] = buffer.back();
    buffer.pop_back();
  }
  items->swap(out);
}

}  // namespace zephon::pipeline

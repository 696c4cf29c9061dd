#include "daemon/pipeline/formats/conversion_progress.h"

namespace zephon::pipeline {

void ConversionProgress::Begin(const std::string& file) {
  absl::MutexLock lock(&mu_);
  ++state_.active;
  state_.current = file;
}

void ConversionProgress::Add(uint64_t text_bytes) {
  absl::MutexLock lock(&mu_);
  state_.text_bytes += text_bytes;
}

void ConversionProgress::End() {
  absl::MutexLock lock(&mu_);
  if (state_.active > 0) --state_.active;
  ++state_.files_done;
  if (state_.active == 0) state_.current.clear();
}

ConversionProgress::Snapshot ConversionProgress::Get() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

uint32_t ConversionProgress::Active() const {
  absl::MutexLock lock(&mu_);
  return state_.active;
}

}  // namespace zephon::pipeline

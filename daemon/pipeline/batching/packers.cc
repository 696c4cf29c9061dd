#include "daemon/pipeline/batching/packers.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zephon::pipeline {
namespace {

class WrapPacker final : public Packer {
 public:
  explicit WrapPacker(const PackOptions& options) : Packer(options) {}

  void Add(const SampleId& id, uint64_t length, std::deque<PackedRecord>* out) override {
    const uint64_t max_length = options_.max_length;
    for (uint64_t offset = 0; offset < length;) {
      const uint64_t take = std::min(length - offset, max_length - filled_);
      current_.push_back(Segment{id, offset, take});
      filled_ += take;
      offset += take;
      if (filled_ == max_length) {
        out->push_back(PackedRecord{std::move(current_)});
        current_.clear();
        filled_ = 0;
      }
    }
  }

  void Flush(std::deque<PackedRecord>*) override {
    counts_.dropped_tokens += filled_;
    current_.clear();
    filled_ = 0;
  }

 private:
  std::vector<Segment> current_;
  uint64_t filled_ = 0;
};

// first_fit and best_fit: bins in opening order, scanned linearly (num_bins is capped
// at kMaxNumBins, and the scan is over lengths only).
class BinPacker final : public Packer {
 public:
  explicit BinPacker(const PackOptions& options) : Packer(options) {}

  void Add(const SampleId& id, uint64_t length, std::deque<PackedRecord>* out) override {
    const uint64_t max_length = options_.max_length;
    if (length == 0) return;
    uint64_t offset = 0;
    if (length > max_length) {
      if (options_.drop_oversized) {
        ++counts_.dropped_samples;
        counts_.dropped_tokens += length;
        return;
      }
      ++counts_.split_samples;
      for (; length - offset >= max_length; offset += max_length) {
        Emit({Segment{id, offset, max_length}}, max_length, out);
      }
      if (offset == length) return;
    }
    Place(Segment{id, offset, length - offset}, out);
  }

  void Flush(std::deque<PackedRecord>* out) override {
    for (Bin& bin : open_) Emit(std::move(bin.segments), bin.used, out);
    open_.clear();
  }

 private:
  struct Bin {
    std::vector<Segment> segments;
    uint64_t used = 0;
  };

  void Place(const Segment& piece, std::deque<PackedRecord>* out) {
    const uint64_t max_length = options_.max_length;
    size_t chosen = open_.size();
    // Bins at max_sequences_per_bin were emitted when they reached it: all open bins
    // take one more segment.
    for (size_t i = 0; i < open_.size(); ++i) {
      const uint64_t room = max_length - open_[i].used;
      if (room < piece.count) continue;
      if (options_.algorithm == PackAlgorithm::kFirstFit) {
        chosen = i;
        break;
      }
      if (chosen == open_.size() || room < max_length - open_[chosen].used) chosen = i;
    }
    if (chosen == open_.size()) {
      if (open_.size() >= options_.num_bins) {  // The bin limit: one goes out.
        const size_t leaving = Leaving();
        Emit(std::move(open_[leaving].segments), open_[leaving].used, out);
        open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(leaving));
      }
      open_.emplace_back();
      chosen = open_.size() - 1;
    }
    Bin& bin = open_[chosen];
    bin.segments.push_back(piece);
    bin.used += piece.count;
    if (bin.used == max_length || Closes(bin)) {
      Emit(std::move(bin.segments), bin.used, out);
      open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(chosen));
    }
  }

  // The bin emitted at the num_bins limit (flush_strategy).
  size_t Leaving() const {
    if (!options_.flush_fullest) return 0;
    size_t fullest = 0;
    for (size_t i = 1; i < open_.size(); ++i) {
      if (open_[i].used > open_[fullest].used) fullest = i;
    }
    return fullest;
  }

  // Whether a knob closes `bin` before it is full.
  bool Closes(const Bin& bin) const {
    if (options_.max_sequences_per_bin > 0 &&
        bin.segments.size() >= options_.max_sequences_per_bin) {
      return true;
    }
    return options_.min_sequence_length > 0 &&
           options_.max_length - bin.used < options_.min_sequence_length;
  }

  std::vector<Bin> open_;  // Opening order.
};

class BestFitWrapPacker final : public Packer {
 public:
  explicit BestFitWrapPacker(const PackOptions& options) : Packer(options) {}

  void Add(const SampleId& id, uint64_t length, std::deque<PackedRecord>* out) override {
    if (length == 0) return;
    const uint64_t seq = arrivals_++;
    pool_.emplace(seq, Item{id, 0, length, false});
    by_length_.emplace(length, seq);
    pooled_tokens_ += length;
    while (pool_.size() > options_.candidate_pool_size && pooled_tokens_ >= options_.max_length) {
      FillRecord(out);
    }
  }

  void Flush(std::deque<PackedRecord>* out) override {
    while (!pool_.empty()) FillRecord(out);
  }

 private:
  struct Item {
    SampleId id;
    uint64_t offset;
    uint64_t length;  // Tokens still pooled, from offset.
    bool split;       // Some of it is already in a record.
  };

  // Moves the first `n` pooled tokens of sample `seq` into *segments.
  void Take(uint64_t seq, uint64_t n, std::vector<Segment>* segments) {
    Item& item = pool_.at(seq);
    segments->push_back(Segment{item.id, item.offset, n});
    pooled_tokens_ -= n;
    by_length_.erase({item.length, seq});
    if (n == item.length) {
      pool_.erase(seq);
      return;
    }
    if (!item.split) ++counts_.split_samples;
    item.split = true;
    item.offset += n;
    item.length -= n;
    by_length_.emplace(item.length, seq);
  }

  // The earliest pooled sample among those of the largest length <= `limit`; end() if
  // none.
  std::set<std::pair<uint64_t, uint64_t>>::iterator LargestUpTo(uint64_t limit) {
    auto it = by_length_.upper_bound({limit, std::numeric_limits<uint64_t>::max()});
    if (it == by_length_.begin()) return by_length_.end();
    --it;
    return by_length_.lower_bound({it->first, 0});
  }

  void FillRecord(std::deque<PackedRecord>* out) {
    std::vector<Segment> segments;
    uint64_t room = options_.max_length;
    bool cut = false;
    const auto capped = [&] {
      return options_.max_sequences_per_bin > 0 &&
             segments.size() >= options_.max_sequences_per_bin;
    };
    // Samples pooled too long go first, oldest first.
    while (room > 0 && !pool_.empty() && !capped()) {
      const uint64_t seq = pool_.begin()->first;  // Copied: Take may erase the entry.
      const uint64_t length = pool_.begin()->second.length;
      if (arrivals_ - 1 - seq < options_.max_candidate_age) break;
      const uint64_t n = std::min(length, room);
      if (n < length) {
        if (cut) break;
        cut = true;
      }
      Take(seq, n, &segments);
      room -= n;
    }
    while (room > 0 && !capped()) {
      auto it = LargestUpTo(room);
      if (it == by_length_.end()) break;
      const uint64_t n = it->first;
      Take(it->second, n, &segments);
      room -= n;
    }
    if (room > 0 && !cut && !by_length_.empty() && !capped()) {
      auto largest = LargestUpTo(std::numeric_limits<uint64_t>::max());
      Take(largest->second, room, &segments);  // Every pooled sample is longer than room.
      room = 0;
    }
    Emit(std::move(segments), options_.max_length - room, out);
  }

  std::map<uint64_t, Item> pool_;                        // By arrival.
  std::set<std::pair<uint64_t, uint64_t>> by_length_;    // (pooled length, arrival).
  uint64_t arrivals_ = 0;
  uint64_t pooled_tokens_ = 0;
};

}  // namespace

absl::StatusOr<PackAlgorithm> ParsePackAlgorithm(absl::string_view name) {
  if (name.empty() || name == "wrap") return PackAlgorithm::kWrap;
  if (name == "first_fit") return PackAlgorithm::kFirstFit;
  if (name == "best_fit") return PackAlgorithm::kBestFit;
  if (name == "best_fit_wrap") return PackAlgorithm::kBestFitWrap;
  return absl::InvalidArgumentError(absl::StrCat(
      "algorithm '", name, "' unknown (wrap, first_fit, best_fit, best_fit_wrap)"));
}

absl::StatusOr<bool> ParseFlushFullest(absl::string_view name) {
  if (name.empty() || name == "fifo") return false;
  if (name == "fullest") return true;
  return absl::InvalidArgumentError(
      absl::StrCat("flush_strategy '", name, "' unknown (fifo, fullest)"));
}

const char* PackAlgorithmName(PackAlgorithm algorithm) {
  switch (algorithm) {
    case PackAlgorithm::kWrap: return "wrap";
    case PackAlgorithm::kFirstFit: return "first_fit";
    case PackAlgorithm::kBestFit: return "best_fit";
    case PackAlgorithm::kBestFitWrap: return "best_fit_wrap";
  }
  return "?";
}

std::unique_ptr<Packer> Packer::Create(const PackOptions& options) {
  switch (options.algorithm) {
    case PackAlgorithm::kWrap: return std::make_unique<WrapPacker>(options);
    case PackAlgorithm::kFirstFit:
    case PackAlgorithm::kBestFit: return std::make_unique<BinPacker>(options);
    case PackAlgorithm::kBestFitWrap: return std::make_unique<BestFitWrapPacker>(options);
  }
  return nullptr;
}

void Packer::Emit(std::vector<Segment> segments, uint64_t used,
                  std::deque<PackedRecord>* out) const {
  if (used < options_.max_length) {
    Segment pad;
    pad.count = options_.max_length - used;
    pad.padding = true;
    segments.push_back(pad);
  }
  out->push_back(PackedRecord{std::move(segments)});
}

}  // namespace zephon::pipeline

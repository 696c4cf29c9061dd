#include "tokenizer/bpe.h"

#include <atomic>
#include <cstdio>
#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "tokenizer/unicode.h"

namespace zephon::tokenizer {

struct Bpe::Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

namespace {

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

std::atomic<uint64_t> next_uid{1};

}  // namespace

absl::StatusOr<std::unique_ptr<Bpe>> Bpe::Create(
    std::vector<std::pair<std::string, int32_t>> vocab,
    const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
    std::string_view where) {
  std::unique_ptr<Bpe> bpe(new Bpe(std::move(options), next_uid.fetch_add(1)));
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab) {
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(Av(where), ".vocab: token '", token, "' has negative id ", id));
    }
    max_id = std::max(max_id, id);
  }
  bpe->id_to_token_.resize(max_id + 1);
  bpe->id_used_.assign(max_id + 1, false);
  bpe->vocab_.reserve(vocab.size());
  for (auto& [token, id] : vocab) {
    if (bpe->id_used_[id]) {
      return absl::InvalidArgumentError(absl::StrCat(
          Av(where), ".vocab: id ", id, " is used by both '", bpe->id_to_token_[id], "' and '",
          token, "'; each id must name one token"));
    }
    bpe->id_used_[id] = true;
    bpe->id_to_token_[id] = token;
    bpe->vocab_.emplace(std::move(token), id);
  }
  for (int b = 0; b < 256; ++b) {
    bpe->byte_ids_[b] = bpe->TokenToId(std::string(1, static_cast<char>(b)));
    char code[8];
    std::snprintf(code, sizeof(code), "<0x%02X>", b);
    bpe->fallback_ids_[b] = bpe->TokenToId(code);
  }
  if (bpe->options_.unk_token.has_value()) {
    bpe->unk_id_ = bpe->TokenToId(*bpe->options_.unk_token);
    if (bpe->unk_id_ < 0) {
      return absl::InvalidArgumentError(absl::StrCat(Av(where), ".unk_token '",
                                                     *bpe->options_.unk_token,
                                                     "' is not in ", Av(where), ".vocab"));
    }
  }
  bpe->merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t a_id = bpe->TokenToId(a), b_id = bpe->TokenToId(b);
    const int32_t new_id = bpe->TokenToId(absl::StrCat(a, b));
    if (a_id < 0 || b_id < 0 || new_id < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          Av(where), ".merges[", rank, "]: '", a_id < 0 ? a : (b_id < 0 ? b : absl::StrCat(a, b)),
          "' is not in ", Av(where), ".vocab; the merges must only name vocabulary tokens"));
    }
    bpe->merges_[PairKey(a_id, b_id)] = (static_cast<int64_t>(rank) << 32) | new_id;
  }
  return bpe;
}

Bpe::~Bpe() = default;

int32_t Bpe::TokenToId(std::string_view token) const {
  auto it = vocab_.find(Av(token));
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* Bpe::IdToToken(int32_t id) const {
  if (id < 0 || id >= id_limit() || !id_used_[id]) return nullptr;
  return &id_to_token_[id];
}

int64_t Bpe::MergeOf(int32_t a, int32_t b) const {
  auto it = merges_.find(PairKey(a, b));
  return it == merges_.end() ? -1 : it->second;
}

uint32_t Bpe::LastUnit(std::string_view token) const {
  if (options_.byte_units) return static_cast<unsigned char>(token.back());
  size_t i = token.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(token[i]) & 0xC0) == 0x80) --i;
  int len;
  return DecodeUtf8(token, i, &len);
}

uint32_t Bpe::FirstUnit(std::string_view token) const {
  if (options_.byte_units) return static_cast<unsigned char>(token[0]);
  int len;
  return DecodeUtf8(token, 0, &len);
}

bool Bpe::UnitIsToken(std::string_view unit) const {
  if (options_.byte_units) return byte_ids_[static_cast<unsigned char>(unit[0])] >= 0;
  return TokenToId(unit) >= 0;
}

size_t Bpe::LastSafeCut(std::string_view word) const {
  if (options_.ignore_merges || word.size() < 2) return 0;
  absl::call_once(joinable_once_, [this] {
    joinable_.reserve(merges_.size());
    for (const auto& [pair, rank_and_id] : merges_) {
      const std::string& left = id_to_token_[pair >> 32];
      const std::string& right = id_to_token_[pair & 0xFFFFFFFF];
      joinable_.insert(static_cast<uint64_t>(LastUnit(left)) << 32 | FirstUnit(right));
    }
  });
  // The start of the character that ends at `end`.
  auto char_start = [&](size_t end) {
    size_t i = end - 1;
    while (i > 0 && (static_cast<unsigned char>(word[i]) & 0xC0) == 0x80) --i;
    return i;
  };
  // Candidates k, from the last character boundary back; the character at k ends at
  // after_end.
  size_t after_end = word.size();
  for (size_t k = char_start(word.size()); k > 0;) {
    const size_t before = char_start(k);
    const std::string_view b = word.substr(before, k - before);
    const std::string_view a = word.substr(k, after_end - k);
    // With byte units the units at the cut are b's last byte and a's first.
    const std::string_view b_unit = options_.byte_units ? b.substr(b.size() - 1) : b;
    const std::string_view a_unit = options_.byte_units ? a.substr(0, 1) : a;
    if (UnitIsToken(b_unit) && UnitIsToken(a_unit) &&
        !joinable_.contains(static_cast<uint64_t>(LastUnit(b)) << 32 | FirstUnit(a))) {
      return k;
    }
    after_end = k;
    k = before;
  }
  return 0;
}

Bpe::WordCache* Bpe::ThreadCache() const {
  // Each thread keeps the caches of its kMaxCachesPerThread most recently used Bpes, keyed
  // by uid (never reused, so a cache can never serve another Bpe's ids); a destroyed Bpe's
  // cache is dropped when newer ones push it out, so memory stays bounded per thread.
  struct Slot {
    uint64_t uid;
    std::unique_ptr<WordCache> cache;
  };
  thread_local std::vector<Slot> slots;
  thread_local uint64_t last_uid = 0;
  thread_local WordCache* last_cache = nullptr;
  if (last_uid == uid_) return last_cache;
  WordCache* found = nullptr;
  for (Slot& slot : slots) {
    if (slot.uid == uid_) found = slot.cache.get();
  }
  if (found == nullptr) {
    if (slots.size() >= kMaxCachesPerThread) slots.erase(slots.begin());
    slots.push_back(Slot{uid_, std::make_unique<WordCache>()});
    found = slots.back().cache.get();
  }
  last_uid = uid_;
  last_cache = found;
  return found;
}

void Bpe::Encode(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    const int32_t id = TokenToId(word);
    if (id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  if (word.size() >= kMaxCachedWordBytes) {
    MergeWord(word, ids);
    return;
  }
  WordCache* cache = ThreadCache();
  auto it = cache->find(Av(word));
  if (it != cache->end()) {
    ids->insert(ids->end(), it->second.begin(), it->second.end());
    return;
  }
  std::vector<int32_t> word_ids;
  MergeWord(word, &word_ids);
  ids->insert(ids->end(), word_ids.begin(), word_ids.end());
  if (cache->size() >= kMaxCacheEntries) cache->clear();
  cache->emplace(std::string(word), std::move(word_ids));
}

void Bpe::InitialSymbols(std::string_view word, std::vector<Symbol>* symbols) const {
  auto add = [&](int32_t id) {
    const int32_t n = static_cast<int32_t>(symbols->size());
    symbols->push_back(Symbol{id, n - 1, n + 1, true});
  };
  if (options_.byte_units) {
    for (unsigned char c : word) {
      // A byte-level vocabulary has all 256 bytes; a missing one becomes unk (if any).
      if (byte_ids_[c] >= 0) {
        add(byte_ids_[c]);
      } else if (unk_id_ >= 0) {
        add(unk_id_);
      }
    }
  } else {
    // HF's merge_word: each character is looked up; a miss becomes <0xXX> byte tokens
    // (byte_fallback) or unk, consecutive unks fused when fuse_unk. A pending unk is
    // emitted only when the next known character arrives (byte-fallback tokens go first),
    // exactly as HF orders them.
    bool pending_unk = false;
    size_t i = 0;
    while (i < word.size()) {
      int len;
      DecodeUtf8(word, i, &len);
      const std::string_view ch = word.substr(i, len);
      i += len;
      const int32_t id = TokenToId(ch);
      if (id >= 0) {
        if (pending_unk) add(unk_id_);
        pending_unk = false;
        add(id);
        continue;
      }
      if (options_.byte_fallback) {
        bool all = true;
        for (unsigned char c : ch) all = all && fallback_ids_[c] >= 0;
        if (all) {
          for (unsigned char c : ch) add(fallback_ids_[c]);
          continue;
        }
      }
      if (unk_id_ >= 0) {
        if (pending_unk && !options_.fuse_unk) add(unk_id_);
        pending_unk = true;
      }
    }
    if (pending_unk) add(unk_id_);
  }
  if (!symbols->empty()) symbols->back().next = -1;
}

void Bpe::MergeWord(std::string_view word, std::vector<int32_t>* ids) const {
  // Reused per thread: uncached words (first sightings, words over kMaxCachedWordBytes).
  thread_local std::vector<Symbol> sym;
  sym.clear();
  InitialSymbols(word, &sym);
  const int32_t n = static_cast<int32_t>(sym.size());
  if (n == 0) return;
  // Candidate merges ordered by (rank, position): the lowest rank wins, the leftmost on a
  // tie. Entries go stale when a neighbour merges; they are re-checked when popped.
  struct Candidate {
    int64_t rank_and_id;
    int32_t pos;
    bool operator>(const Candidate& o) const {
      const int64_t r = rank_and_id >> 32, orank = o.rank_and_id >> 32;
      return r != orank ? r > orank : pos > o.pos;
    }
  };
  // A min-heap (std::greater) over a reused per-thread vector.
  thread_local std::vector<Candidate> heap;
  heap.clear();
  const std::greater<Candidate> after;
  auto push = [&](Candidate c) {
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end(), after);
  };
  for (int32_t i = 0; i + 1 < n; ++i) {
    const int64_t m = MergeOf(sym[i].id, sym[i + 1].id);
    if (m >= 0) heap.push_back(Candidate{m, i});
  }
  std::make_heap(heap.begin(), heap.end(), after);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), after);
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[left.next];
    const int64_t now = MergeOf(left.id, right.id);
    const int32_t new_id = static_cast<int32_t>(top.rank_and_id & 0xFFFFFFFF);
    if (now < 0 || static_cast<int32_t>(now & 0xFFFFFFFF) != new_id) continue;
    left.id = new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    if (left.prev >= 0) {
      const int64_t m = MergeOf(sym[left.prev].id, left.id);
      if (m >= 0) push(Candidate{m, left.prev});
    }
    if (left.next >= 0) {
      const int64_t m = MergeOf(left.id, sym[left.next].id);
      if (m >= 0) push(Candidate{m, top.pos});
    }
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) ids->push_back(sym[i].id);
}

}  // namespace zephon::tokenizer

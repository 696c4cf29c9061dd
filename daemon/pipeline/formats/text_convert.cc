#include "daemon/pipeline/formats/text_convert.h"

#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/json_scan.h"
#include "tokenizer/unicode.h"

namespace zephon::pipeline {
namespace {

constexpr char kStatsMagic[] = "zephon-text-stats-v1";    // + its '\0'; 7 counts
constexpr char kStatsMagicV2[] = "zephon-text-stats-v2";  // + its '\0'; 8 counts
static_assert(sizeof(kStatsMagic) == sizeof(kStatsMagicV2));
constexpr size_t kStatsCountsV1 = 7;

// How long the converting thread leaves a block it waits on to the pool before running
// it itself (WriteOldest), while another conversion runs on the node (its
// ConversionProgress): a few blocks' tokenization (512 KiB takes 10-30 ms on one thread),
// so a pool working through the other conversion's queued blocks gets to it. With no
// other conversion running, a queued block is run at once, as a pool busy with other work
// would make it wait.
constexpr absl::Duration kPoolClaimGrace = absl::Milliseconds(100);

// The persisted counts, in their on-disk order (v1 holds the first kStatsCountsV1).
std::vector<uint64_t*> Counts(TextShardStats* s) {
  return {&s->records,         &s->samples,           &s->tokens,
          &s->invalid_utf8_records, &s->skipped_missing, &s->truncated_records,
          &s->split_records,   &s->null_records};
}

}  // namespace

// One block of records, tokenized by whoever claims it first (a pool task or the
// converting thread) and written by the converting thread.
struct TextBlock {
  struct Record {
    uint64_t line = 0;
    size_t begin = 0;  // the text is text[begin, begin + size)
    size_t size = 0;
    bool valid_utf8 = false;  // checked by the caller: Encode need not check again
    // Prompt/completion records (TextTokenization::fields): part_sizes[parts_begin,
    // parts_end) cut the text into its fields, in order. Empty range: one field.
    size_t parts_begin = 0, parts_end = 0;
    // keep_payload: the record's JSON object is payloads[payload_begin, + payload_size).
    size_t payload_begin = 0, payload_size = 0;
  };
  std::string text;
  std::string payloads;
  std::vector<Record> records;
  std::vector<size_t> part_sizes;

  // Results, written by the claimer before `done` is notified.
  std::vector<int32_t> ids;            // every sample's ids back to back
  std::vector<uint8_t> mask;           // TextHasLossMask: one byte per id (else empty)
  std::vector<uint64_t> lengths;       // per sample
  std::vector<uint32_t> sample_records;  // keep_payload: each sample's index in `records`
  uint64_t truncated = 0, split = 0;
  absl::Status status;

  std::atomic<bool> claimed{false};
  std::atomic<bool> abandoned{false};  // the conversion failed: skip the work
  absl::Notification done;
};

namespace {

// The special tokens of one part of a multi-field record: BOS (per `mode`) with the
// first, EOS with the last (text_tokenization.h). kTokenizerDefault is refused for
// multi-field records (tokenize_spec.cc), as a post_processor cannot be split.
tokenizer::SpecialTokens PartMode(tokenizer::SpecialTokens mode, bool first, bool last) {
  using ST = tokenizer::SpecialTokens;
  const bool bos = first && (mode == ST::kBosEos || mode == ST::kBos);
  const bool eos = last && (mode == ST::kBosEos || mode == ST::kEos);
  return bos && eos ? ST::kBosEos : bos ? ST::kBos : eos ? ST::kEos : ST::kNone;
}

// Encodes a record's fields one after another onto block->ids (and its mask bytes
// onto block->mask when the tokenization masks). Returns Encode's error.
absl::Status EncodeParts(TextBlock* block, const TextBlock::Record& r,
                         const TextTokenization& text) {
  size_t at = r.begin;
  const size_t parts = r.parts_end - r.parts_begin;
  for (size_t i = 0; i < parts; ++i) {
    const size_t size = block->part_sizes[r.parts_begin + i];
    const std::string_view part = std::string_view(block->text).substr(at, size);
    at += size;
    const tokenizer::SpecialTokens mode = PartMode(text.special_tokens, i == 0, i + 1 == parts);
    RETURN_IF_ERROR(r.valid_utf8 ? text.tokenizer->EncodeValidUtf8(part, mode, &block->ids)
                                 : text.tokenizer->Encode(part, mode, &block->ids));
    if (TextHasLossMask(text)) {
      block->mask.resize(block->ids.size(), text.loss_on[i] ? 1 : 0);
    }
  }
  return absl::OkStatus();
}

void Tokenize(TextBlock* block, const TextTokenization& text, const std::string& path,
              const char* unit) {
  const uint64_t max = text.max_length;
  // About 4 bytes of text a token for the languages that dominate pretraining corpora:
  // one allocation a block instead of a doubling series (each a copy and, past the
  // mmap threshold, fresh pages to fault in).
  block->ids.reserve(block->text.size() / 3 + 16 * block->records.size());
  block->lengths.reserve(block->records.size());
  for (size_t ri = 0; ri < block->records.size(); ++ri) {
    const TextBlock::Record& r = block->records[ri];
    // Encode appends: the record's ids land in place, no per-record copy.
    const size_t start = block->ids.size();
    const std::string_view record = std::string_view(block->text).substr(r.begin, r.size);
    const absl::Status s =
        r.parts_end > r.parts_begin ? EncodeParts(block, r, text)
        : r.valid_utf8
            ? text.tokenizer->EncodeValidUtf8(record, text.special_tokens, &block->ids)
            : text.tokenizer->Encode(record, text.special_tokens, &block->ids);
    // A one-field record of a masking tokenization (not produced by ConvertText, which
    // splits every record of a multi-field tokenization) is trained on whole.
    if (TextHasLossMask(text)) block->mask.resize(block->ids.size(), 1);
    if (!s.ok()) {
      block->status =
          absl::Status(s.code(), absl::StrCat(path, ": ", unit, " ", r.line, ": ", s.message()));
      return;
    }
    const uint64_t n = block->ids.size() - start;
    if (text.long_samples == TextTokenization::LongSamples::kTruncate && n > max) {
      ++block->truncated;
      block->ids.resize(start + max);
      if (TextHasLossMask(text)) block->mask.resize(start + max);
      block->lengths.push_back(max);
    } else if (text.long_samples != TextTokenization::LongSamples::kSplit || n <= max) {
      block->lengths.push_back(n);
    } else {
      ++block->split;
      for (uint64_t at = 0; at < n; at += max) block->lengths.push_back(std::min(max, n - at));
    }
    if (text.keep_payload) {
      block->sample_records.resize(block->lengths.size(), static_cast<uint32_t>(ri));
    }
  }
}

// Tokenizes `block` unless another claimer has (or the conversion was abandoned).
void Claim(const std::shared_ptr<TextBlock>& block, const TextTokenization& text,
           const std::string& path, const char* unit) {
  if (block->claimed.exchange(true)) return;
  if (!block->abandoned.load()) Tokenize(block.get(), text, path, unit);
  block->done.Notify();
}

}  // namespace

TextBlockConverter::TextBlockConverter(const std::string& path, const char* unit,
                                       const TextTokenization& text,
                                       const TextConvertOptions& options, CacheWriter* writer,
                                       TextShardStats* stats)
    : path_(path), unit_(unit), text_(text), options_(options), writer_(writer), stats_(stats),
      max_in_flight_(static_cast<size_t>(std::max(1, options.max_blocks_in_flight))),
      filling_(std::make_shared<TextBlock>()) {}

TextBlockConverter::~TextBlockConverter() {
  // On an error, tasks not yet started skip their blocks.
  for (const auto& b : in_flight_) b->abandoned.store(true);
}

void TextBlockConverter::AddRecord(uint64_t number, std::string_view value, bool valid_utf8,
                                   std::string_view payload) {
  TextBlock::Record r;
  r.line = number;
  r.begin = filling_->text.size();
  r.size = value.size();
  r.valid_utf8 = valid_utf8;
  filling_->text.append(value);
  if (text_.keep_payload) {
    r.payload_begin = filling_->payloads.size();
    r.payload_size = payload.size();
    filling_->payloads.append(payload);
  }
  filling_->records.push_back(r);
}

void TextBlockConverter::AddRecordParts(uint64_t number,
                                        const std::vector<std::string_view>& values) {
  TextBlock::Record r;
  r.line = number;
  r.begin = filling_->text.size();
  r.valid_utf8 = true;
  r.parts_begin = filling_->part_sizes.size();
  for (std::string_view v : values) {
    filling_->text.append(v);
    filling_->part_sizes.push_back(v.size());
  }
  r.parts_end = filling_->part_sizes.size();
  r.size = filling_->text.size() - r.begin;
  filling_->records.push_back(r);
}

bool TextBlockConverter::BlockFull() const {
  return filling_->text.size() >= options_.block_bytes;
}

absl::Status TextBlockConverter::Dispatch() {
  if (filling_->records.empty()) return absl::OkStatus();
  std::shared_ptr<TextBlock> block = std::move(filling_);
  filling_ = std::make_shared<TextBlock>();
  in_flight_.push_back(block);
  if (options_.submit) {
    // The task owns what it reads, so it may outlive this conversion.
    auto task = [block, text = text_, path = path_, unit = unit_]() {
      Claim(block, text, path, unit);
    };
    if (!options_.submit(std::move(task))) Claim(block, text_, path_, unit_);
  }
  while (in_flight_.size() >= max_in_flight_) RETURN_IF_ERROR(WriteOldest());
  return absl::OkStatus();
}

absl::Status TextBlockConverter::Finish() {
  RETURN_IF_ERROR(Dispatch());
  while (!in_flight_.empty()) RETURN_IF_ERROR(WriteOldest());
  return absl::OkStatus();
}

absl::Status TextBlockConverter::WriteOldest() {
  std::shared_ptr<TextBlock> block = in_flight_.front();
  // While another conversion runs, a queued block is left to the pool for a moment: the
  // pool may be busy with that conversion's blocks queued before it (shards convert at
  // once), and taking it here would put one more tokenizing thread on the pool's cores.
  // Past the grace the pool counts as busy or stopped and this thread runs it, so
  // conversion is never stuck.
  if (options_.submit && options_.progress != nullptr && options_.progress->Active() > 1 &&
      !block->claimed.load()) {
    block->done.WaitForNotificationWithTimeout(kPoolClaimGrace);
  }
  Claim(block, text_, path_, unit_);  // runs it here unless a task has started it
  block->done.WaitForNotification();
  in_flight_.pop_front();
  RETURN_IF_ERROR(block->status);
  size_t at = 0;
  const bool masked = !block->mask.empty() || TextHasLossMask(text_);
  for (size_t i = 0; i < block->lengths.size(); ++i) {
    const uint64_t len = block->lengths[i];
    std::string_view kept;
    if (text_.keep_payload) {
      const TextBlock::Record& r = block->records[block->sample_records[i]];
      kept = std::string_view(block->payloads).substr(r.payload_begin, r.payload_size);
    }
    RETURN_IF_ERROR(writer_->Add(block->ids.data() + at, len,
                                 masked ? block->mask.data() + at : nullptr, kept));
    at += len;
  }
  if (options_.progress != nullptr) options_.progress->Add(block->text.size());
  stats_->samples += block->lengths.size();
  stats_->tokens += block->ids.size();
  stats_->truncated_records += block->truncated;
  stats_->split_records += block->split;
  return absl::OkStatus();
}


TextShardStats& TextShardStats::operator+=(const TextShardStats& other) {
  TextShardStats o = other;
  const std::vector<uint64_t*> mine = Counts(this), theirs = Counts(&o);
  for (size_t i = 0; i < mine.size(); ++i) *mine[i] += *theirs[i];
  tokenized = tokenized || other.tokenized;
  tokenized_bytes += other.tokenized_bytes;
  tokenize_seconds += other.tokenize_seconds;
  return *this;
}

bool TextShardStats::SameCounts(const TextShardStats& other) const {
  TextShardStats a = *this, b = other;
  const std::vector<uint64_t*> x = Counts(&a), y = Counts(&b);
  for (size_t i = 0; i < x.size(); ++i) {
    if (*x[i] != *y[i]) return false;
  }
  return true;
}

absl::Status ValidateTextTokenization(const TextTokenization& text, const std::string& what) {
  if (text.tokenizer == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": tokenize has no tokenizer"));
  }
  if (text.field.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": tokenize field is empty; name the JSONL field holding the text "
                           "(default \"", kDefaultTextField, "\")"));
  }
  if (!text.loss_on.empty() && text.loss_on.size() != text.fields.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": tokenize loss_on has ", text.loss_on.size(), " flags for ",
        text.fields.size(), " fields"));
  }
  if (text.fields.size() > 1 &&
      text.special_tokens == tokenizer::SpecialTokens::kTokenizerDefault) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": special_tokens 'tokenizer_default' cannot be split across several fields; "
              "use bos_eos, bos, eos or none"));
  }
  const bool limited = text.long_samples != TextTokenization::LongSamples::kKeep;
  if (limited && text.max_length == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": tokenize truncation or split_long_samples needs max_length >= 1"));
  }
  const absl::Status special = text.tokenizer->CheckSpecialTokens(text.special_tokens);
  if (!special.ok()) {
    return absl::Status(special.code(), absl::StrCat(what, ": ", special.message()));
  }
  return absl::OkStatus();
}

std::string TextOptionBytes(const TextTokenization& text) {
  std::string bytes = text.field;
  bytes.push_back('\0');
  bytes += text.tokenizer == nullptr ? std::string() : text.tokenizer->fingerprint();
  bytes.push_back('\0');
  bytes.push_back(static_cast<char>(text.special_tokens));
  AppendU64(text.max_length, &bytes);
  bytes.push_back(static_cast<char>(text.long_samples));
  bytes.push_back(text.skip_missing ? 1 : 0);
  // Prompt/completion: only when set, so one-field keys and fingerprints stay.
  if (!text.fields.empty()) {
    bytes += std::string("\0fields\0", 8);
    for (const std::string& f : text.fields) {
      bytes += f;
      bytes.push_back('\0');
    }
    for (bool on : text.loss_on) bytes.push_back(on ? 1 : 0);
  }
  return bytes;
}

std::string TextCacheKeyBytes(const TextTokenization& text) {
  std::string bytes = TextOptionBytes(text);
  if (text.keep_payload) bytes += std::string("\0keep_payload", 13);
  return bytes;
}

std::string EncodeTextStats(const TextShardStats& stats) {
  const bool v1 = stats.null_records == 0;
  std::string bytes(v1 ? kStatsMagic : kStatsMagicV2, sizeof(kStatsMagic));
  TextShardStats s = stats;
  std::vector<uint64_t*> counts = Counts(&s);
  if (v1) counts.resize(kStatsCountsV1);
  for (uint64_t* v : counts) AppendU64(*v, &bytes);
  return bytes;
}

bool DecodeTextStats(std::string_view bytes, TextShardStats* stats) {
  const std::string_view magic = bytes.substr(0, sizeof(kStatsMagic));
  size_t n = 0;
  if (magic == std::string_view(kStatsMagic, sizeof(kStatsMagic))) {
    n = kStatsCountsV1;
  } else if (magic == std::string_view(kStatsMagicV2, sizeof(kStatsMagicV2))) {
    n = Counts(stats).size();
  } else {
    return false;
  }
  if (bytes.size() != sizeof(kStatsMagic) + 8 * n) return false;
  *stats = TextShardStats();
  std::vector<uint64_t*> counts = Counts(stats);
  counts.resize(n);
  const char* p = bytes.data() + sizeof(kStatsMagic);
  for (uint64_t* v : counts) {
    *v = LoadU64(p);
    p += 8;
  }
  return true;
}

absl::Status ConvertText(LineReader* lines, const std::string& path,
                         const TextTokenization& text, const TextConvertOptions& options,
                         CacheWriter* writer, TextShardStats* stats) {
  *stats = TextShardStats();
  static_assert(kLineReadAheadBytes >= kJsonPaddingBytes, "lines are scanned in place");
  if (options.progress != nullptr) options.progress->Begin(path);
  const absl::Cleanup ended = [&options] {
    if (options.progress != nullptr) options.progress->End();
  };
  TextBlockConverter converter(path, "line", text, options, writer, stats);
  // One scanner per field read: `field`, or each of `fields` (prompt/completion).
  const std::vector<std::string> names =
      text.fields.empty() ? std::vector<std::string>{text.field} : text.fields;
  std::vector<std::unique_ptr<StringFieldScanner>> scanners;
  for (const std::string& name : names) {
    scanners.push_back(std::make_unique<StringFieldScanner>(name));
  }
  std::vector<StringField> found(names.size());
  std::vector<std::string_view> values(names.size());
  std::string repaired;
  std::string_view line;
  size_t bom = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool more, NextRecordLine(lines, &line, &bom));
    if (!more) break;
    stats->tokenized_bytes = lines->line_offset() + bom + line.size() + 1;
    ++stats->records;
    size_t readable_after = kLineReadAheadBytes;
    const bool valid = simdjson::validate_utf8(line.data(), line.size());
    if (!valid) {
      repaired = tokenizer::ReplaceInvalidUtf8(line);
      line = repaired;
      readable_after = 0;
    }
    bool missing = false, replaced = false;
    for (size_t f = 0; f < names.size() && !missing; ++f) {
      StringField& field = found[f];
      size_t at = 0;
      const absl::Status s = scanners[f]->Scan(line, readable_after, &field, &at);
      if (!s.ok()) {
        return absl::DataLossError(absl::StrCat(
            path, ": line ", lines->line_number(), " (decompressed byte offset ",
            lines->line_offset() + bom + at,
            valid ? "" : ", in the line with invalid UTF-8 replaced", "): ", s.message()));
      }
      if (field.state != StringField::State::kString) {
        if (text.skip_missing) {
          missing = true;
          break;
        }
        const std::string what =
            field.state == StringField::State::kMissing
                ? "is missing"
                : absl::StrCat("is not a string (it is ", field.found_type, ")");
        return absl::DataLossError(absl::StrCat(
            path, ": line ", lines->line_number(), ": text field \"", names[f], "\" ", what,
            "; fix the record, or pass on_missing=\"skip\" to tokenize() to skip such "
            "records"));
      }
      replaced = replaced || field.replaced_surrogates;
      values[f] = field.value;  // valid until scanners[f]'s next Scan
    }
    if (missing) {
      ++stats->skipped_missing;
      continue;
    }
    if (!valid || replaced) ++stats->invalid_utf8_records;
    // The line was checked (or repaired) above, and the scanner's unescaping writes
    // U+FFFD for an unpaired surrogate: the values are valid UTF-8.
    if (text.fields.empty()) {
      // keep_payload: the line itself is the record's JSON object (repaired above).
      converter.AddRecord(lines->line_number(), values[0], /*valid_utf8=*/true, line);
    } else {
      converter.AddRecordParts(lines->line_number(), values);
    }
    if (converter.BlockFull()) RETURN_IF_ERROR(converter.Dispatch());
  }
  return converter.Finish();
}

}  // namespace zephon::pipeline

#include "daemon/pipeline/formats/dataset.h"

#include <algorithm>
#include <functional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cache_dir.h"
#include "common/mix.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/dataset_files.h"
#include "daemon/pipeline/formats/flat_reader.h"
#include "daemon/pipeline/formats/jsonl_reader.h"
#include "daemon/pipeline/formats/megatron_reader.h"
#include "daemon/pipeline/formats/open_dataset_files.h"
#include "daemon/pipeline/formats/ordered_jobs.h"
#include "daemon/pipeline/formats/record_formats.h"
#include "daemon/pipeline/formats/record_shard.h"
#include "daemon/pipeline/formats/token_cache_files.h"
#include "daemon/storage/object_store.h"

namespace zephon::pipeline {
namespace {

constexpr uint64_t kDefaultFlatSampleTokens = 2048;

std::string StripMegatronSuffix(const std::string& path) {
  if (absl::EndsWith(path, ".bin") || absl::EndsWith(path, ".idx")) {
    return path.substr(0, path.size() - 4);
  }
  return path;
}

using Kind = DatasetFiles::Kind;

// A ".bin" whose ".idx" is missing is most likely a Megatron shard that lost (or has not
// yet received) its index; reading it as raw tokens would silently train on garbage
// boundaries, so auto-detection refuses it. Raw token files named .bin (nanoGPT's
// train.bin) are read with an explicit format "flat".
absl::Status LoneBinError(const std::string& bin) {
  return absl::NotFoundError(absl::StrCat(
      bin, " has no matching .idx file (", StripMegatronSuffix(bin),
      ".idx): a Megatron shard needs both "
      "files; copy the .idx next to it, or set format \"flat\" "
      "(Python: fmt=\"flat\") if these are raw token files"));
}

absl::StatusOr<std::string> DetectFormat(const std::string& path,
                                         const DatasetFiles::Resolved& src,
                                         DatasetFiles& files) {
  if (src.kind == Kind::kSingle) {
    ASSIGN_OR_RETURN(bool has_idx, files.Exists(StripMegatronSuffix(path) + ".idx"));
    if (has_idx) return std::string("megatron");
    if (absl::EndsWith(path, ".bin")) return LoneBinError(path);
    if (IsJsonlFileName(path)) return std::string("jsonl");
    if (auto record = RecordFormats::Global().Detect({path})) return record->name;
    return std::string("flat");
  }
  bool jsonl = false;
  for (const auto& f : src.files) {
    if (absl::EndsWith(f, ".idx")) return std::string("megatron");
    if (absl::EndsWith(f, ".bin")) {
      ASSIGN_OR_RETURN(bool has_idx, files.Exists(StripMegatronSuffix(f) + ".idx"));
      if (has_idx) return std::string("megatron");
      return LoneBinError(f);
    }
    jsonl = jsonl || IsJsonlFileName(f);
  }
  if (jsonl) return std::string("jsonl");
  if (auto record = RecordFormats::Global().Detect(src.files)) return record->name;
  return std::string("flat");
}

// The spec's loss mask source (none when loss_mask_field is unset).
LossMaskSource LossMaskSourceOf(const proto::DatasetSpec& spec) {
  LossMaskSource source;
  source.field = spec.loss_mask_field();
  source.format = spec.loss_mask_format() == proto::DatasetSpec::SPANS ? LossMaskFormat::kSpans
                                                                      : LossMaskFormat::kValues;
  return source;
}

// loss_mask_field and loss_mask_format apply to token-id JSONL and record-format datasets
// (a record format reads the mask column as a list of integers: 0/1 values, or spans as
// flat [start, end) pairs).
std::string RecordFormatList();  // below

absl::Status CheckLossMaskSource(const proto::DatasetSpec& spec, const std::string& format,
                                 bool record, bool text) {
  const std::string what =
      absl::StrCat("dataset '", spec.name(), "' (path ", spec.path(), ", format '", format, "')");
  if (spec.loss_mask_field().empty()) {
    if (spec.loss_mask_format() != proto::DatasetSpec::LOSS_MASK_FORMAT_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": loss_mask_format without loss_mask_field; name the mask's field too"));
    }
    return absl::OkStatus();
  }
  if (text) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": loss_mask_field reads a mask aligned with token ids, but tokenize reads "
              "this dataset as text; mask text records with tokenize(loss_on=[...]) "
              "instead, or drop loss_mask_field"));
  }
  if (format != "jsonl" && !record) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": loss_mask_field applies to JSONL and record-format (", RecordFormatList(),
        ") datasets of token ids, whose records hold a mask; drop it (megatron and flat "
        "shards hold tokens only)"));
  }
  return absl::OkStatus();
}

std::string TokenCacheDir(const OpenOptions& options) {
  return options.token_cache != nullptr ? options.token_cache->dir()
         : options.cache_dir.empty()    ? zephon::DefaultCacheDir()
                                        : options.cache_dir;
}

absl::StatusOr<std::vector<std::unique_ptr<ShardReader>>> OpenMegatron(
    const std::string& path, const DatasetFiles::Resolved& src, DatasetFiles& files) {
  std::vector<std::string> prefixes;
  if (src.kind == Kind::kSingle) {
    prefixes.push_back(StripMegatronSuffix(path));
  } else {
    std::set<std::string> bins, idxs;
    for (const auto& f : src.files) {
      if (absl::EndsWith(f, ".bin")) bins.insert(StripMegatronSuffix(f));
      if (absl::EndsWith(f, ".idx")) idxs.insert(StripMegatronSuffix(f));
    }
    if (src.kind == Kind::kDirectory) {
      // A directory must hold complete pairs; a glob may match just one side of
      // each pair (opening the pair names a missing partner).
      for (const auto& s : idxs) {
        if (!bins.count(s)) {
          return absl::NotFoundError(
              absl::StrCat(s, ".idx has no matching .bin file (", s, ".bin is missing)"));
        }
      }
      for (const auto& s : bins) {
        if (!idxs.count(s)) return LoneBinError(s + ".bin");
      }
    }
    bins.insert(idxs.begin(), idxs.end());
    prefixes.assign(bins.begin(), bins.end());  // std::set: sorted.
  }
  std::vector<std::unique_ptr<ShardReader>> shards;
  for (const auto& p : prefixes) {
    ASSIGN_OR_RETURN(std::unique_ptr<ShardFile> idx, files.Open(p + ".idx"));
    ASSIGN_OR_RETURN(std::unique_ptr<ShardFile> bin, files.Open(p + ".bin"));
    ASSIGN_OR_RETURN(std::unique_ptr<MegatronShard> shard,
                     MegatronShard::Open(std::move(idx), std::move(bin)));
    shards.push_back(std::move(shard));
  }
  return shards;
}

absl::StatusOr<std::vector<std::unique_ptr<ShardReader>>> OpenFlat(
    const proto::DatasetSpec& spec, const DatasetFiles::Resolved& src, DatasetFiles& files) {
  ASSIGN_OR_RETURN(TokenType type,
                   ParseFlatDtype(spec.dtype().empty() ? "uint16" : spec.dtype()));
  const uint64_t sample_tokens =
      spec.flat_sample_tokens() == 0 ? kDefaultFlatSampleTokens : spec.flat_sample_tokens();
  std::vector<std::unique_ptr<ShardReader>> shards;
  for (const auto& f : src.files) {
    ASSIGN_OR_RETURN(std::unique_ptr<ShardFile> file, files.Open(f));
    ASSIGN_OR_RETURN(std::unique_ptr<FlatShard> shard,
                     FlatShard::Open(std::move(file), type, sample_tokens));
    shards.push_back(std::move(shard));
  }
  return shards;
}

// JSONL shards; with `text`, text shards whose stats are appended to *text_stats.
absl::StatusOr<std::vector<std::unique_ptr<ShardReader>>> OpenJsonl(
    const proto::DatasetSpec& spec, const DatasetFiles::Resolved& src, DatasetFiles& files,
    const OpenOptions& options, const TextTokenization* text,
    std::vector<TextShardStats>* text_stats) {
  JsonlShardOptions shard_options;
  shard_options.field = !spec.jsonl_field().empty() ? spec.jsonl_field()
                        : !spec.field().empty()      ? spec.field()
                                                     : kDefaultJsonlField;
  shard_options.cache_dir = TokenCacheDir(options);
  shard_options.token_cache = options.token_cache.get();
  shard_options.max_line_bytes = options.max_jsonl_line_bytes;
  shard_options.text = text;
  shard_options.convert = options.text_convert;
  shard_options.loss_mask = LossMaskSourceOf(spec);
  std::vector<std::string> paths;
  for (const auto& f : src.files) {
    if (src.kind == Kind::kDirectory && !IsJsonlFileName(f)) continue;
    paths.push_back(f);
  }
  // Each job prepares its shard under `files_mu` (DatasetFiles is thread-compatible;
  // jobs start in shard order, so it is called in that order) and converts it outside.
  absl::Mutex files_mu;
  std::vector<std::unique_ptr<JsonlShard>> opened(paths.size());
  std::vector<std::function<absl::Status()>> jobs;
  for (size_t i = 0; i < paths.size(); ++i) {
    jobs.push_back([&, i]() -> absl::Status {
      absl::StatusOr<DatasetFiles::JsonlOpener> opener;
      {
        absl::MutexLock lock(&files_mu);
        opener = files.PrepareJsonl(paths[i], shard_options);
      }
      if (!opener.ok()) return opener.status();
      ASSIGN_OR_RETURN(opened[i], (*opener)());
      return absl::OkStatus();
    });
  }
  RETURN_IF_ERROR(RunOrderedJobs(jobs, options.shards_at_once));
  std::vector<std::unique_ptr<ShardReader>> shards;
  for (std::unique_ptr<JsonlShard>& shard : opened) {
    if (text != nullptr) text_stats->push_back(*shard->text_stats());
    shards.push_back(std::move(shard));
  }
  return shards;
}

// Record-format shards (record_formats.h), each converted into the token cache; their
// conversion counts are appended to *stats and their checksums to *checksums.
absl::StatusOr<std::vector<std::unique_ptr<ShardReader>>> OpenRecords(
    const proto::DatasetSpec& spec, const RecordFormat& format, const std::string& path,
    const DatasetFiles::Resolved& src, DatasetFiles& files, const OpenOptions& options,
    const TextTokenization* text, std::vector<TextShardStats>* stats,
    std::vector<std::string>* checksums) {
  std::vector<RecordShardRef> refs;
  if (format.resolve) {
    ASSIGN_OR_RETURN(refs, format.resolve(path, src, files));
  } else {
    ASSIGN_OR_RETURN(refs, DefaultRecordShards(format, path, src));
  }
  RecordShardOptions shard_options;
  shard_options.format = format.name;
  shard_options.field = !spec.field().empty()       ? spec.field()
                        : !spec.jsonl_field().empty() ? spec.jsonl_field()
                                                      : kDefaultJsonlField;
  shard_options.text = text;
  shard_options.on_null =
      spec.on_null() == proto::DatasetSpec::ERROR ? OnNull::kError : OnNull::kSkip;
  shard_options.cache_dir = TokenCacheDir(options);
  shard_options.token_cache = options.token_cache.get();
  shard_options.convert = options.text_convert;
  shard_options.loss_mask = LossMaskSourceOf(spec);
  RecordField field;
  field.kind = text != nullptr ? RecordField::Kind::kText : RecordField::Kind::kTokens;
  field.name = text != nullptr ? text->field : shard_options.field;
  // Prompt/completion: the text columns after the first (text->field is fields[0]).
  std::vector<RecordField> part_fields;
  if (text != nullptr && !text->fields.empty()) {
    for (size_t k = 1; k < text->fields.size(); ++k) {
      part_fields.push_back({RecordField::Kind::kText, text->fields[k]});
    }
  }
  // Each job reads its shard's identity, file and checksum under `files_mu` (DatasetFiles
  // is thread-compatible; jobs start in shard order) and converts it outside; at most
  // shards_at_once source files are open at a time.
  struct Prepared {
    std::string checksum;
    std::unique_ptr<RecordShard> shard;
  };
  absl::Mutex files_mu;
  std::vector<Prepared> prepared(refs.size());
  std::vector<std::function<absl::Status()>> jobs;
  for (size_t i = 0; i < refs.size(); ++i) {
    jobs.push_back([&, i]() -> absl::Status {
      const RecordShardRef& ref = refs[i];
      Prepared& p = prepared[i];
      DatasetFiles::Identity id;
      std::unique_ptr<ShardFile> file, mask_file;
      std::vector<std::unique_ptr<ShardFile>> part_files(part_fields.size());
      {
        absl::MutexLock lock(&files_mu);
        ASSIGN_OR_RETURN(id, files.SourceIdentity(ref.path));
        ASSIGN_OR_RETURN(file, files.Open(ref.path));
        // The mask column, and each tokenize field after the first, is read by another
        // reader of the same file, in lockstep.
        if (shard_options.loss_mask.enabled()) {
          ASSIGN_OR_RETURN(mask_file, files.Open(ref.path));
        }
        for (auto& part_file : part_files) {
          ASSIGN_OR_RETURN(part_file, files.Open(ref.path));
        }
      }
      ASSIGN_OR_RETURN(p.checksum, format.checksum(*file, ref));
      const auto open = [&]() { return format.open(std::move(file), ref, field); };
      const RecordField mask_field{RecordField::Kind::kTokens, shard_options.loss_mask.field};
      const auto open_mask = [&]() { return format.open(std::move(mask_file), ref, mask_field); };
      std::vector<RecordSourceOpener> open_parts;
      for (size_t k = 0; k < part_fields.size(); ++k) {
        open_parts.push_back(
            [&, k]() { return format.open(std::move(part_files[k]), ref, part_fields[k]); });
      }
      ASSIGN_OR_RETURN(p.shard, RecordShard::Open(ref.path, id.size, id.bytes, p.checksum,
                                                  shard_options, open, id.unchanged,
                                                  open_mask, open_parts));
      return absl::OkStatus();
    });
  }
  RETURN_IF_ERROR(RunOrderedJobs(jobs, options.shards_at_once));
  std::vector<std::unique_ptr<ShardReader>> shards;
  for (Prepared& p : prepared) {
    stats->push_back(*p.shard->text_stats());
    checksums->push_back(std::move(p.checksum));
    shards.push_back(std::move(p.shard));
  }
  return shards;
}

// "parquet, mds", or what says there is none.
std::string RecordFormatList() {
  const std::vector<std::string> names = RecordFormats::Global().Names();
  return names.empty() ? "none in this build" : absl::StrJoin(names, ", ");
}

std::string KnownFormats() {
  std::string names = "megatron, flat, jsonl";
  for (const std::string& n : RecordFormats::Global().Names()) absl::StrAppend(&names, ", ", n);
  return names;
}

}  // namespace

Dataset::Dataset(std::string name, std::string format,
                 std::vector<std::unique_ptr<ShardReader>> shards)
    : name_(std::move(name)), format_(std::move(format)), shards_(std::move(shards)) {
  for (const auto& s : shards_) {
    num_samples_ += s->NumSamples();
    has_loss_mask_ = has_loss_mask_ || s->HasLossMask();
  }
  content_.resize(shards_.size());
}

absl::StatusOr<uint64_t> Dataset::ShardContentChecksum(uint32_t s) const {
  {
    absl::MutexLock lock(&content_mu_);
    if (content_[s].has_value()) return *content_[s];
  }
  // Computed outside the lock: it walks every sample and may read an object store. Two
  // racing callers compute the same value.
  const ShardReader& shard = *shards_[s];
  const uint64_t n = shard.NumSamples();
  uint64_t h = Combine(0x5EED'C0E7'E47ULL, n);
  for (uint64_t i = 0; i < n; ++i) h = Combine(h, shard.SampleLength(i));
  std::vector<int32_t> tokens;
  for (uint64_t i : {uint64_t{0}, n / 2, n == 0 ? 0 : n - 1}) {
    if (i >= n) continue;
    const uint64_t count = std::min(shard.SampleLength(i), kContentSampleTokens);
    tokens.resize(count);
    absl::Status read = shard.CopyTokens(i, 0, count, tokens.data());
    if (!read.ok()) {
      return absl::Status(read.code(), absl::StrCat("content checksum of ", shard.FileName(),
                                                    ": ", read.message()));
    }
    h = Combine(h, HashBytes(std::string_view(reinterpret_cast<const char*>(tokens.data()),
                                              tokens.size() * sizeof(int32_t))));
  }
  absl::MutexLock lock(&content_mu_);
  content_[s] = h;
  return h;
}

absl::StatusOr<std::unique_ptr<Dataset>> Dataset::FromShards(
    std::string name, std::string format, std::vector<std::unique_ptr<ShardReader>> shards) {
  if (shards.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset '", name, "' has no shards"));
  }
  if (shards.size() > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("dataset '", name, "' has too many shards"));
  }
  std::unique_ptr<Dataset> ds(new Dataset(std::move(name), std::move(format), std::move(shards)));
  if (ds->NumSamples() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset '", ds->name(), "' has zero samples"));
  }
  return ds;
}

absl::StatusOr<std::unique_ptr<Dataset>> Dataset::Open(const proto::DatasetSpec& spec,
                                                       const OpenOptions& options,
                                                       const TextTokenization* text) {
  if (spec.path().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset '", spec.name(), "': empty path"));
  }
  // The same classification as aggregate_dir: "file:///abs" reads "/abs"; an unknown
  // scheme ("gs://") is INVALID_ARGUMENT here rather than a missing local file.
  absl::StatusOr<storage::Location> location = storage::ClassifyLocation(spec.path());
  if (!location.ok()) {
    return absl::Status(location.status().code(), absl::StrCat("dataset '", spec.name(), "': ",
                                                               location.status().message()));
  }
  const std::string& path = location->path_or_url;
  ASSIGN_OR_RETURN(std::unique_ptr<DatasetFiles> files, OpenDatasetFiles(*location, options));
  ASSIGN_OR_RETURN(DatasetFiles::Resolved src, files->Resolve(path));
  std::string format = spec.format();
  if (format.empty()) {
    ASSIGN_OR_RETURN(format, DetectFormat(path, src, *files));
  }
  const std::shared_ptr<const RecordFormat> record = RecordFormats::Global().Find(format);
  if (text != nullptr && format != "jsonl" && record == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", spec.name(), "' (path ", spec.path(), ") is in format '", format,
        "', but tokenize reads JSONL text (format \"jsonl\": .jsonl, .jsonl.gz, "
        ".jsonl.zst): pre-tokenized data needs no tokenize; drop tokenize() for it or "
        "point the dataset at JSONL text files"));
  }
  if (text != nullptr) {
    RETURN_IF_ERROR(
        ValidateTextTokenization(*text, absl::StrCat("dataset '", spec.name(), "'")));
  }
  if (spec.on_null() != proto::DatasetSpec::ON_NULL_UNSPECIFIED && record == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", spec.name(), "' (path ", spec.path(), ") is in format '", format,
        "': on_null applies to record formats (", RecordFormatList(),
        "), whose records can be null; drop it"));
  }
  RETURN_IF_ERROR(CheckLossMaskSource(spec, format, record != nullptr, text != nullptr));
  std::vector<TextShardStats> text_stats;
  std::vector<std::string> checksums;
  std::vector<std::unique_ptr<ShardReader>> shards;
  const absl::Time opening = absl::Now();
  if (format == "megatron") {
    ASSIGN_OR_RETURN(shards, OpenMegatron(path, src, *files));
  } else if (format == "flat") {
    ASSIGN_OR_RETURN(shards, OpenFlat(spec, src, *files));
  } else if (format == "jsonl") {
    ASSIGN_OR_RETURN(shards, OpenJsonl(spec, src, *files, options, text, &text_stats));
  } else if (record != nullptr) {
    ASSIGN_OR_RETURN(shards, OpenRecords(spec, *record, path, src, *files, options, text,
                                         &text_stats, &checksums));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", spec.name(), "': format '", format, "' unknown (", KnownFormats(), ")"));
  }
  auto ds = FromShards(spec.name(), format, std::move(shards));
  if (!ds.ok()) {
    return absl::Status(ds.status().code(),
                        absl::StrCat(ds.status().message(), " (path ", spec.path(), ")"));
  }
  if (text != nullptr) (*ds)->text_options_ = TextOptionBytes(*text);
  (*ds)->text_stats_ = std::move(text_stats);  // text and record datasets
  (*ds)->shards_open_seconds_ = absl::ToDoubleSeconds(absl::Now() - opening);
  (*ds)->record_checksums_ = std::move(checksums);
  return ds;
}

// Layout hashed: name, 0, format, 0, then per shard: file name, 0, u64 LE samples,
// u64 LE bytes, and for a record format u64 LE checksum size, checksum; a text dataset
// then appends 0, "text", 0, TextOptionBytes. Seed 0.
uint64_t Dataset::Fingerprint() const {
  std::string bytes = name_;
  bytes.push_back('\0');
  bytes += format_;
  bytes.push_back('\0');
  for (const auto& s : shards_) {
    bytes += s->FileName();
    bytes.push_back('\0');
    AppendU64(s->NumSamples(), &bytes);
    AppendU64(s->ByteSize(), &bytes);
    if (!record_checksums_.empty()) {
      const std::string& checksum = record_checksums_[&s - shards_.data()];
      AppendU64(checksum.size(), &bytes);
      bytes += checksum;
    }
  }
  if (is_text()) {
    bytes.push_back('\0');
    bytes += "text";
    bytes.push_back('\0');
    bytes += text_options_;
  }
  return HashBytes(bytes);
}

TextShardStats Dataset::TextStats() const {
  TextShardStats sum;
  for (const TextShardStats& s : text_stats_) sum += s;
  // Shards may convert at once, so their seconds overlap: the open's wall time is what
  // the conversion took (it includes opening the warm shards, which is quick).
  if (sum.tokenized) sum.tokenize_seconds = shards_open_seconds_;
  return sum;
}

}  // namespace zephon::pipeline

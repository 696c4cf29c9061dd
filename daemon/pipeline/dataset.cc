#include "daemon/pipeline/dataset.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/mix.h"
#include "common/status_macros.h"
#include "daemon/pipeline/flat_reader.h"
#include "daemon/pipeline/jsonl_reader.h"
#include "daemon/pipeline/megatron_reader.h"
#include "daemon/pipeline/path_glob.h"

namespace zephon::pipeline {
namespace fs = std::filesystem;
namespace {

constexpr uint64_t kDefaultFlatSampleTokens = 2048;

bool IsDir(const std::string& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}
bool IsFile(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Regular files of `dir` not starting with '.', sorted by name (byte order).
absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || !it->is_regular_file()) continue;
    names.push_back(name);
  }
  if (ec) return absl::NotFoundError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  std::sort(names.begin(), names.end());
  return names;
}

std::string StripMegatronSuffix(const std::string& path) {
  if (absl::EndsWith(path, ".bin") || absl::EndsWith(path, ".idx")) {
    return path.substr(0, path.size() - 4);
  }
  return path;
}

// The files a dataset path names: a directory listing, glob matches, or the path.
struct Source {
  enum class Kind { kDirectory, kGlob, kSingle };
  Kind kind = Kind::kSingle;
  std::vector<std::string> files;  // Full paths, sorted (kSingle: just `path`).
};

absl::StatusOr<Source> ResolveSource(const std::string& path) {
  Source src;
  if (IsGlobPattern(path)) {
    src.kind = Source::Kind::kGlob;
    ASSIGN_OR_RETURN(src.files, ExpandGlob(path));
  } else if (IsDir(path)) {
    src.kind = Source::Kind::kDirectory;
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListFiles(path));
    for (const auto& n : names) src.files.push_back((fs::path(path) / n).string());
  } else {
    src.files.push_back(path);
  }
  return src;
}

std::string DetectFormat(const std::string& path, const Source& src) {
  if (src.kind == Source::Kind::kSingle) {
    if (IsFile(StripMegatronSuffix(path) + ".idx")) return "megatron";
    return IsJsonlFileName(path) ? "jsonl" : "flat";
  }
  bool jsonl = false;
  for (const auto& f : src.files) {
    if (absl::EndsWith(f, ".idx")) return "megatron";
    if (absl::EndsWith(f, ".bin") && IsFile(StripMegatronSuffix(f) + ".idx")) return "megatron";
    jsonl = jsonl || IsJsonlFileName(f);
  }
  return jsonl ? "jsonl" : "flat";
}

absl::StatusOr<std::vector<std::unique_ptr<ShardReader>>> OpenMegatron(
    const std::string& path, const Source& src) {
  std::vector<std::string> prefixes;
  if (src.kind == Source::Kind::kSingle) {
    prefixes.push_back(StripMegatronSuffix(path));
  } else {
    std::set<std::string> bins, idxs;
    for (const auto& f : src.files) {
      if (absl::EndsWith(f, ".bin")) bins.insert(StripMegatronSuffix(f));
      if (absl::EndsWith(f, ".idx")) idxs.insert(StripMegatronSuffix(f));
    }
    if (src.kind == Source::Kind::kDirectory) {
      // A directory must hold complete pairs; a glob may match just one side of
      // each pair (MegatronShard::Open names a missing partner).
      for (const auto& s : idxs) {
        if (!bins.count(s)) return absl::NotFoundError(absl::StrCat(s, ".idx has no matching .bin file"));
      }
      for (const auto& s : bins) {
        if (!idxs.count(s)) return absl::NotFoundError(absl::StrCat(s, ".bin has no matching .idx file"));
      }
    }
    bins.insert(idxs.begin(), idxs.end());
    prefixes.assign(bins.begin(), bins.end());  // std::set: sorted.
  }
  std::vector<std::unique_ptr<ShardReader>> shards;
  for (const auto& p : prefixes) {
    ASSIGN_OR_RETURN(std::unique_ptr<MegatronShard> shard, MegatronShard::Open(p));
    shards.push_back(std::move(shard));
  }
  return shards;
}

absl::StatusOr<std::vector<std::unique_ptr<ShardReader>>> OpenFlat(
    const proto::DatasetSpec& spec, const Source& src) {
  ASSIGN_OR_RETURN(TokenType type,
                   ParseFlatDtype(spec.dtype().empty() ? "uint16" : spec.dtype()));
  const uint64_t sample_tokens =
      spec.flat_sample_tokens() == 0 ? kDefaultFlatSampleTokens : spec.flat_sample_tokens();
  std::vector<std::unique_ptr<ShardReader>> shards;
  for (const auto& f : src.files) {
    ASSIGN_OR_RETURN(std::unique_ptr<FlatShard> shard, FlatShard::Open(f, type, sample_tokens));
    shards.push_back(std::move(shard));
  }
  return shards;
}

absl::StatusOr<std::vector<std::unique_ptr<ShardReader>>> OpenJsonl(
    const proto::DatasetSpec& spec, const Source& src, const OpenOptions& options) {
  const std::string field = spec.jsonl_field().empty() ? kDefaultJsonlField : spec.jsonl_field();
  const std::string cache_dir = options.cache_dir.empty() ? DefaultCacheDir() : options.cache_dir;
  std::vector<std::unique_ptr<ShardReader>> shards;
  for (const auto& f : src.files) {
    if (src.kind == Source::Kind::kDirectory && !IsJsonlFileName(f)) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<JsonlShard> shard, JsonlShard::Open(f, field, cache_dir));
    shards.push_back(std::move(shard));
  }
  return shards;
}

void AppendU64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

}  // namespace

Dataset::Dataset(std::string name, std::string format,
                 std::vector<std::unique_ptr<ShardReader>> shards)
    : name_(std::move(name)), format_(std::move(format)), shards_(std::move(shards)) {
  for (const auto& s : shards_) num_samples_ += s->NumSamples();
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
                                                       const OpenOptions& options) {
  if (spec.path().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset '", spec.name(), "': empty path"));
  }
  ASSIGN_OR_RETURN(Source src, ResolveSource(spec.path()));
  const std::string format = spec.format().empty() ? DetectFormat(spec.path(), src) : spec.format();
  std::vector<std::unique_ptr<ShardReader>> shards;
  if (format == "megatron") {
    ASSIGN_OR_RETURN(shards, OpenMegatron(spec.path(), src));
  } else if (format == "flat") {
    ASSIGN_OR_RETURN(shards, OpenFlat(spec, src));
  } else if (format == "jsonl") {
    ASSIGN_OR_RETURN(shards, OpenJsonl(spec, src, options));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", spec.name(), "': format '", format, "' unknown (megatron, flat, jsonl)"));
  }
  auto ds = FromShards(spec.name(), format, std::move(shards));
  if (!ds.ok()) {
    return absl::Status(ds.status().code(),
                        absl::StrCat(ds.status().message(), " (path ", spec.path(), ")"));
  }
  return ds;
}

// Layout hashed: name, 0, format, 0, then per shard: file name, 0, u64 LE samples,
// u64 LE bytes. Seed 0.
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
  }
  return HashBytes(bytes);
}

}  // namespace zephon::pipeline

#include "daemon/tokenizers.h"

#include <sys/stat.h>

#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/digest.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "daemon/pipeline/tokenize_spec.h"

namespace zephon::daemon {
namespace {

// Loaded tokenizers held strongly beyond their users (see recent_).
constexpr size_t kKeepRecent = 4;

std::shared_ptr<spdlog::logger> Log() { return SubsystemLogger("tokenizer"); }

// "size:mtime_ns:inode" of a local file, "-" when it does not exist.
std::string LocalVersion(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "-";
  return absl::StrCat(st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, ":",
                      st.st_ino);
}

std::string OptionsKey(const tokenizer::TokenizerOptions& o) {
  return absl::StrCat("split_special_tokens=", o.split_special_tokens,
                      ";bos=", o.bos_token_id.value_or(-1), ";eos=", o.eos_token_id.value_or(-1));
}

// `status` naming `source`, unless its message already does (Tokenizer::Load's do).
absl::Status Naming(const std::string& source, const absl::Status& status) {
  if (absl::StrContains(status.message(), source)) return status;
  return absl::Status(status.code(), absl::StrCat("tokenizer ", source, ": ", status.message()));
}

bool IsS3(const std::string& path) { return absl::StartsWith(path, "s3://"); }

}  // namespace

TokenizerCache::TokenizerCache(StoreOpener open_store) : open_store_(std::move(open_store)) {}

absl::StatusOr<TokenizerCache::Source> TokenizerCache::IdentifyS3(
    const std::string& url, const tokenizer::TokenizerOptions& options) const {
  ASSIGN_OR_RETURN(storage::S3Location where, storage::ParseS3Url(url));
  // A file URL is its "directory" and a key in it; any other URL is the directory.
  std::string root = url;
  std::string file;
  const bool is_file = absl::EndsWith(where.key, ".json") || absl::EndsWith(where.key, ".model");
  if (is_file) {
    const size_t slash = url.rfind('/');
    root = url.substr(0, slash);
    file = url.substr(slash + 1);
  } else {
    while (absl::EndsWith(root, "/") && root.size() > 5) root.pop_back();
  }
  if (open_store_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("tokenizer '", url, "': this zephond reads no object stores"));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<storage::ObjectStore> store, open_store_(root));
  Source source;
  if (is_file) {
    ASSIGN_OR_RETURN(storage::ObjectInfo info, store->Head(file));
    source.identity = absl::StrCat(url, "@", info.version);
    const bool model = absl::EndsWith(file, ".model");
    source.load = [store, file, version = info.version, options, model]()
        -> absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> {
      ASSIGN_OR_RETURN(std::string bytes, store->Get(file, version));
      if (model) return tokenizer::Tokenizer::FromSentencePieceModel(bytes, options);
      return tokenizer::Tokenizer::FromJson(bytes, options);
    };
    return source;
  }
  absl::StatusOr<storage::ObjectInfo> json = store->Head("tokenizer.json");
  if (absl::IsNotFound(json.status())) {
    return absl::NotFoundError(absl::StrCat(
        "tokenizer '", url, "' has no tokenizer.json (and is not a .json or .model URL); "
        "pass the s3:// prefix of an HF model snapshot or the tokenizer file itself"));
  }
  RETURN_IF_ERROR(json.status());
  absl::StatusOr<storage::ObjectInfo> config = store->Head("tokenizer_config.json");
  if (!config.ok() && !absl::IsNotFound(config.status())) return config.status();
  const std::string config_version = config.ok() ? config->version : "";
  source.identity = absl::StrCat(url, "/tokenizer.json@", json->version,
                                 ";tokenizer_config.json@", config.ok() ? config_version : "-");
  source.load = [store, json_version = json->version, has_config = config.ok(), config_version,
                 options]() -> absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> {
    ASSIGN_OR_RETURN(std::string bytes, store->Get("tokenizer.json", json_version));
    std::string config_bytes;
    if (has_config) {
      ASSIGN_OR_RETURN(config_bytes, store->Get("tokenizer_config.json", config_version));
    }
    return tokenizer::Tokenizer::FromJson(bytes, options, config_bytes);
  };
  return source;
}

absl::StatusOr<TokenizerCache::Source> TokenizerCache::Identify(
    const proto::TokenizeSpec& resolved) const {
  const tokenizer::TokenizerOptions options = pipeline::TokenizerOptionsOf(resolved);
  Source source;
  if (resolved.tokenizer_path().empty()) {
    // Inline: the bytes are the identity. Copied into the loader: the caller's spec
    // may be stripped of them before the load runs.
    source.identity = absl::StrCat("inline:", Sha256Hex(resolved.tokenizer_json()), ":",
                                   Sha256Hex(resolved.tokenizer_config_json()));
    source.load = [json = resolved.tokenizer_json(), config = resolved.tokenizer_config_json(),
                   options]() { return tokenizer::Tokenizer::FromJson(json, options, config); };
  } else if (IsS3(resolved.tokenizer_path())) {
    ASSIGN_OR_RETURN(source, IdentifyS3(resolved.tokenizer_path(), options));
  } else {
    const std::string& path = resolved.tokenizer_path();
    source.identity = absl::StrCat("file:", path, "@", LocalVersion(path), ";",
                                   LocalVersion(path + "/tokenizer.json"), ";",
                                   LocalVersion(path + "/tokenizer_config.json"));
    source.load = [path, options]() { return tokenizer::Tokenizer::Load(path, options); };
  }
  absl::StrAppend(&source.identity, "|", OptionsKey(options));
  return source;
}

absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> TokenizerCache::Get(
    const proto::TokenizeSpec& resolved) {
  const std::string name = resolved.tokenizer_path().empty()
                               ? std::string("(inline tokenizer.json)")
                               : absl::StrCat("'", resolved.tokenizer_path(), "'");
  absl::StatusOr<Source> source = Identify(resolved);
  if (!source.ok()) return Naming(name, source.status());
  std::shared_ptr<Entry> entry;
  {
    absl::MutexLock lock(&mu_);
    while (entry == nullptr) {
      auto it = entries_.find(source->identity);
      if (it == entries_.end()) {
        entry = entries_[source->identity] = std::make_shared<Entry>();
        break;
      }
      std::shared_ptr<Entry> found = it->second;
      const auto done = [&found]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return found->done; };
      mu_.Await(absl::Condition(&done));
      if (auto tok = found->tokenizer.lock()) {
        ++stats_.hits;
        return tok;
      }
      // Its load failed (and removed it) or nobody holds the tokenizer any more: load
      // anew, unless another Get already replaced it (then wait for that one).
      it = entries_.find(source->identity);
      if (it != entries_.end() && it->second == found) {
        entry = it->second = std::make_shared<Entry>();
      }
    }
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> loaded = source->load();
  absl::MutexLock lock(&mu_);
  entry->done = true;
  if (!loaded.ok()) {
    auto it = entries_.find(source->identity);
    if (it != entries_.end() && it->second == entry) entries_.erase(it);
    return Naming(name, loaded.status());
  }
  std::shared_ptr<const tokenizer::Tokenizer> tok = *std::move(loaded);
  entry->tokenizer = tok;
  ++stats_.loads;
  recent_.push_back(tok);
  if (recent_.size() > kKeepRecent) recent_.pop_front();
  // Entries whose tokenizer nobody holds any more go (their identity is in the key).
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = it->second->done && it->second->tokenizer.expired() ? entries_.erase(it) : std::next(it);
  }
  Log()->info("loaded tokenizer {} fingerprint={} vocab_size={} in {:.0f} ms", name,
              tok->fingerprint(), tok->vocab_size(),
              absl::ToDoubleMilliseconds(absl::Now() - start));
  return tok;
}

TokenizerCache::Stats TokenizerCache::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::StatusOr<std::optional<pipeline::TextTokenization>> PrepareTokenize(
    TokenizerCache& cache, proto::PipelineSpec* resolved) {
  proto::TokenizeSpec* tokenize = pipeline::FindMutableTokenize(resolved);
  if (tokenize == nullptr) return std::nullopt;
  ASSIGN_OR_RETURN(std::shared_ptr<const tokenizer::Tokenizer> tok, cache.Get(*tokenize));
  if (!tokenize->fingerprint().empty() && tokenize->fingerprint() != tok->fingerprint()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tokenizer ", pipeline::DescribeTokenize(*tokenize), ": the client loaded it with "
        "fingerprint ", tokenize->fingerprint(), " but zephond loaded fingerprint ",
        tok->fingerprint(), " from the same source. The files differ between the client's "
        "machine and this node (or changed meanwhile); every rank must read the same "
        "tokenizer"));
  }
  tokenize->set_fingerprint(tok->fingerprint());
  tokenize->clear_tokenizer_json();
  tokenize->clear_tokenizer_config_json();
  return pipeline::MakeTextTokenization(*tokenize, std::move(tok));
}

}  // namespace zephon::daemon

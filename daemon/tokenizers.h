// The daemon's tokenizers: loaded at attach for a spec's tokenize operator, once per
// source for the whole node, so N ranks and N instances reading one tokenizer parse its
// (often multi-MB) tokenizer.json once.
//
// A source is identified by what it holds now: a local path by the size, mtime and inode
// of the file(s) read (the path, or a directory's tokenizer.json and
// tokenizer_config.json); an s3:// URL by the objects' ETags; inline bytes by their
// SHA-256. A rewritten file or object is a new entry (loaded again), never a stale hit.
// The options that change ids (bos/eos overrides, split_special_tokens) are part of the
// identity. Entries are held while in use (weakly) plus the few loaded last.
//
// s3:// sources are read through the daemon's ObjectStore (the --s3-* flags' credentials
// and endpoints, as for s3:// datasets): a URL ending in ".json" or ".model" is that
// object; any other is a "directory" holding tokenizer.json (+ tokenizer_config.json if
// present). Local paths are tokenizer::Tokenizer::Load's forms.
//
// Thread-safety: thread-safe. Concurrent Gets of one source wait for one load.
#ifndef ZEPHON_DAEMON_TOKENIZERS_H_
#define ZEPHON_DAEMON_TOKENIZERS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pipeline/formats/text_tokenization.h"
#include "daemon/storage/object_store.h"
#include "proto/spec.pb.h"
#include "tokenizer/tokenizer.h"

namespace zephon::daemon {

class TokenizerCache {
 public:
  // Opens the store rooted at an s3:// "directory" URL (storage::OpenStore in the
  // daemon; a fake in tests).
  using StoreOpener =
      std::function<absl::StatusOr<std::unique_ptr<storage::ObjectStore>>(const std::string&)>;

  explicit TokenizerCache(StoreOpener open_store);

  // The tokenizer of a resolved TokenizeSpec (pipeline::ResolveTokenize), loaded or
  // found. Errors name the source: NOT_FOUND for a missing path or object,
  // INVALID_ARGUMENT for a malformed tokenizer (with the JSON path of the component),
  // the store's errors for s3://. Failures are not cached.
  absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> Get(
      const proto::TokenizeSpec& resolved) ABSL_LOCKS_EXCLUDED(mu_);

  struct Stats {
    uint64_t loads = 0;  // tokenizers parsed
    uint64_t hits = 0;   // Gets served without parsing
  };
  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    bool done = false;                                   // guarded by mu_
    std::weak_ptr<const tokenizer::Tokenizer> tokenizer;  // guarded by mu_
  };
  // What the source holds now (see the file comment) and how to load it.
  struct Source {
    std::string identity;
    std::function<absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>>()> load;
  };
  absl::StatusOr<Source> Identify(const proto::TokenizeSpec& resolved) const;
  absl::StatusOr<Source> IdentifyS3(const std::string& url,
                                    const tokenizer::TokenizerOptions& options) const;

  const StoreOpener open_store_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  // The last few loaded, held strongly: ranks attaching one after another (each
  // instance gone before the next attach) do not parse the file again.
  std::deque<std::shared_ptr<const tokenizer::Tokenizer>> recent_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

// At attach, before the datasets open: loads the tokenizer of `resolved`'s tokenize
// operator (none: nullopt), refuses a client-asserted fingerprint that differs from
// the loaded one (FAILED_PRECONDITION naming both: ranks must not read different
// tokenizer files), sets the fingerprint the spec hash covers, drops the inline
// tokenizer.json bytes from the spec (it is stored in checkpoints and logged: the
// fingerprint stands for them), and builds the TextTokenization the datasets read
// (pipeline::MakeTextTokenization: BOS/EOS checked).
absl::StatusOr<std::optional<pipeline::TextTokenization>> PrepareTokenize(
    TokenizerCache& cache, proto::PipelineSpec* resolved);

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_TOKENIZERS_H_

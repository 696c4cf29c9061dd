#include "daemon/pipeline/formats/mds/mds_hash.h"

#include <openssl/evp.h>
#include <xxhash.h>

#include <memory>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "spdlog/spdlog.h"

namespace zephon::pipeline::mds {
namespace {

std::string Hex(const void* p, size_t n) {
  return absl::BytesToHexString(absl::string_view(static_cast<const char*>(p), n));
}

// hashlib's name for an OpenSSL digest: '_' where OpenSSL has '-', and the default
// digest sizes of blake2b/blake2s spelled out.
std::string OpenSslName(absl::string_view algorithm) {
  if (algorithm == "blake2b") return "BLAKE2B-512";
  if (algorithm == "blake2s") return "BLAKE2S-256";
  return absl::StrReplaceAll(algorithm, {{"_", "-"}});
}

std::optional<std::string> OpenSslHex(absl::string_view algorithm, absl::string_view bytes) {
  // shake_* need a length; Streaming leaves them out too.
  if (algorithm.substr(0, 6) == "shake_") return std::nullopt;
  std::unique_ptr<EVP_MD, void (*)(EVP_MD*)> md(
      EVP_MD_fetch(nullptr, OpenSslName(algorithm).c_str(), nullptr), EVP_MD_free);
  if (md == nullptr) return std::nullopt;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &n, md.get(), nullptr) != 1) {
    return std::nullopt;
  }
  return Hex(digest, n);
}

absl::Mutex unverified_mu;
std::set<std::string>& Unverified() ABSL_EXCLUSIVE_LOCKS_REQUIRED(unverified_mu) {
  static auto* names = new std::set<std::string>;
  return *names;
}

}  // namespace

std::optional<std::string> MdsHashHex(absl::string_view algorithm, absl::string_view bytes) {
  if (algorithm == "xxh32") {
    XXH32_canonical_t c;
    XXH32_canonicalFromHash(&c, XXH32(bytes.data(), bytes.size(), 0));
    return Hex(&c, sizeof(c));
  }
  if (algorithm == "xxh64") {
    XXH64_canonical_t c;
    XXH64_canonicalFromHash(&c, XXH64(bytes.data(), bytes.size(), 0));
    return Hex(&c, sizeof(c));
  }
  if (algorithm == "xxh3_64") {
    XXH64_canonical_t c;
    XXH64_canonicalFromHash(&c, XXH3_64bits(bytes.data(), bytes.size()));
    return Hex(&c, sizeof(c));
  }
  if (algorithm == "xxh128" || algorithm == "xxh3_128") {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(bytes.data(), bytes.size()));
    return Hex(&c, sizeof(c));
  }
  return OpenSslHex(algorithm, bytes);
}

absl::Status VerifyMdsHashes(absl::string_view name, absl::string_view bytes,
                             const std::vector<std::pair<std::string, std::string>>& hashes) {
  for (const auto& [algorithm, expected] : hashes) {
    const std::optional<std::string> got = MdsHashHex(algorithm, bytes);
    if (!got) {
      absl::MutexLock lock(&unverified_mu);
      if (Unverified().insert(algorithm).second) {
        spdlog::warn("MDS: hash algorithm {} (listed for {} and maybe others) is not one Zephon "
                     "computes; shards are not checked against it",
                     algorithm, std::string(name));
      }
      continue;
    }
    if (*got != expected) {
      return absl::DataLossError(absl::StrCat("MDS shard ", name, ": ", algorithm, " is ", *got,
                                              " but the index says ", expected,
                                              " (the file is corrupt or from another write)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace zephon::pipeline::mds

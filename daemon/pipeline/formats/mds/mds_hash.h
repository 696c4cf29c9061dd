// Verification of the hashes an MDS index lists for a shard file (Streaming's
// hashing.py: any hashlib algorithm, hexdigest; any xxhash algorithm, hexdigest, which
// is the canonical big-endian form).
//
// Computed here: the hashlib algorithms OpenSSL's default provider has (md5, sha1,
// sha224/256/384/512, sha512_224/256, sha3_224..512, blake2b, blake2s, sm3), and
// xxh32, xxh64, xxh3_64, xxh128 / xxh3_128 (libxxhash). Any other listed algorithm is
// not verified; the first time each is met the log says so once.
// A digest that differs is DATA_LOSS naming the file, the algorithm and both digests.
// Thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_HASH_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_HASH_H_

#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace zephon::pipeline::mds {

// Lowercase hex digest of `bytes` under Streaming's algorithm name, or nullopt when the
// algorithm is not one computed here.
std::optional<std::string> MdsHashHex(absl::string_view algorithm, absl::string_view bytes);

// Checks `bytes` (the file `name`) against each (algorithm, hex digest).
absl::Status VerifyMdsHashes(absl::string_view name, absl::string_view bytes,
                             const std::vector<std::pair<std::string, std::string>>& hashes);

}  // namespace zephon::pipeline::mds

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_HASH_H_

// Making the local paths of an attach request absolute on the client's side.
//
// zephond runs in its own working directory, so a relative aggregate_dir or dataset path
// sent as written would resolve against the daemon's cwd, not the trainer's (and zephond
// refuses a relative aggregate_dir for that reason). The client resolves them against
// its own cwd before sending. Location URLs ("s3://...", "file:///...", anything with
// "://") and absolute paths are left unchanged; the daemon validates URLs.
// Thread-safe (reads the process cwd).
#ifndef ZEPHON_CLIENT_REQUEST_PATHS_H_
#define ZEPHON_CLIENT_REQUEST_PATHS_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/zephon.pb.h"

namespace zephon::client {

// `path` joined to `cwd` when it is a relative local path ("" stays ""); unchanged
// otherwise. Lexical only: "./" prefixes are dropped, nothing is resolved on disk.
std::string AbsoluteLocation(const std::string& path, const std::string& cwd);

// Applies AbsoluteLocation with the process cwd to rank.aggregate_dir and every
// dataset path. INTERNAL (naming errno) when the cwd cannot be read.
absl::Status AbsolutizeLocalPaths(proto::AttachRequest* request);

}  // namespace zephon::client

#endif  // ZEPHON_CLIENT_REQUEST_PATHS_H_

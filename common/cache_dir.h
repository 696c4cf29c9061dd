// Where a node keeps its caches (JSONL token caches, the object-store shard cache under
// "<dir>/objects"): $XDG_CACHE_HOME/zephon if XDG_CACHE_HOME is set and non-empty, else
// $HOME/.cache/zephon, else /tmp/zephon-<uid>/cache. Shared by the daemon and its
// pipeline so that a flag-less zephond and its datasets agree on one directory.
// The directory is not created here. Thread-safe (reads the environment only).
#ifndef ZEPHON_COMMON_CACHE_DIR_H_
#define ZEPHON_COMMON_CACHE_DIR_H_

#include <string>

namespace zephon {

std::string DefaultCacheDir();

}  // namespace zephon

#endif  // ZEPHON_COMMON_CACHE_DIR_H_

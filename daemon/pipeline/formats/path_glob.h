// Glob expansion of dataset paths (glob(3), no brace or tilde expansion).
//
// A dataset path is a glob pattern iff it contains '*', '?' or '['; a literal path
// holding one of them must escape it with '\'. Matches are returned sorted by full
// path in byte order (independent of the locale), keeping only regular files (after
// following symlinks); like the shell, '*' and '?' do not match a leading '.'.
// Pure functions of the filesystem; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_PATH_GLOB_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_PATH_GLOB_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace zephon::pipeline {

bool IsGlobPattern(std::string_view path);

// The regular files matching `pattern`. NOT_FOUND naming the pattern when nothing
// (or only non-regular files) matches; INTERNAL naming it on a read error.
absl::StatusOr<std::vector<std::string>> ExpandGlob(const std::string& pattern);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_PATH_GLOB_H_

#include "daemon/pipeline/formats/path_glob.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace zephon::pipeline {

bool IsGlobPattern(std::string_view path) {
  return path.find_first_of("*?[") != std::string_view::npos;
}

absl::StatusOr<std::vector<std::string>> ExpandGlob(const std::string& pattern) {
  glob_t g;
  const int rc = glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> files;
  if (rc == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      std::error_code ec;
      if (std::filesystem::is_regular_file(g.gl_pathv[i], ec)) files.push_back(g.gl_pathv[i]);
    }
  }
  globfree(&g);
  if (rc != 0 && rc != GLOB_NOMATCH) {
    return absl::InternalError(absl::StrCat("glob '", pattern, "' failed: ",
                                            rc == GLOB_ABORTED ? "read error" : "out of memory"));
  }
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat("glob '", pattern, "' matches no files"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace zephon::pipeline

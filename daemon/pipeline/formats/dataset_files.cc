#include "daemon/pipeline/formats/dataset_files.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/path_glob.h"
#include "daemon/pipeline/formats/token_cache_files.h"

namespace zephon::pipeline {
namespace fs = std::filesystem;
namespace {

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

class LocalFiles final : public DatasetFiles {
 public:
  absl::StatusOr<Resolved> Resolve(const std::string& path) override {
    Resolved out;
    std::error_code ec;
    if (IsGlobPattern(path)) {
      out.kind = Kind::kGlob;
      ASSIGN_OR_RETURN(out.files, ExpandGlob(path));
    } else if (fs::is_directory(path, ec)) {
      out.kind = Kind::kDirectory;
      ASSIGN_OR_RETURN(std::vector<std::string> names, ListFiles(path));
      for (const auto& n : names) out.files.push_back((fs::path(path) / n).string());
    } else {
      out.files.push_back(path);
    }
    return out;
  }

  absl::StatusOr<bool> Exists(const std::string& path) override {
    std::error_code ec;
    return fs::is_regular_file(path, ec);
  }

  absl::StatusOr<std::unique_ptr<ShardFile>> Open(const std::string& path) override {
    return OpenLocalShardFile(path);
  }

  absl::StatusOr<JsonlOpener> PrepareJsonl(const std::string& path,
                                           const JsonlShardOptions& options) override {
    return JsonlOpener([path, &options] { return JsonlShard::Open(path, options); });
  }

  absl::StatusOr<Identity> SourceIdentity(const std::string& path) override {
    ASSIGN_OR_RETURN(SourceStat st, StatSource(path));
    std::error_code ec;
    const std::string abs_path = fs::absolute(path, ec).lexically_normal().string();
    if (ec) return absl::InternalError(absl::StrCat("cannot resolve ", path, ": ", ec.message()));
    Identity id;
    id.size = st.size;
    id.bytes = LocalSourceIdentity(abs_path, st);
    id.unchanged = [path, st]() -> absl::Status {
      ASSIGN_OR_RETURN(SourceStat after, StatSource(path));
      if (!(after == st)) {
        return absl::AbortedError(
            absl::StrCat(path, " changed while it was converted to a token cache; retry"));
      }
      return absl::OkStatus();
    };
    return id;
  }
};

}  // namespace

std::unique_ptr<DatasetFiles> LocalDatasetFiles() { return std::make_unique<LocalFiles>(); }

}  // namespace zephon::pipeline

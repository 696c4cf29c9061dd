#include "client/request_paths.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace zephon::client {

std::string AbsoluteLocation(const std::string& path, const std::string& cwd) {
  if (path.empty() || path.front() == '/' || absl::StrContains(path, "://")) return path;
  std::string rest = path;
  while (absl::StartsWith(rest, "./")) rest.erase(0, 2);
  std::string base = cwd;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  if (rest.empty() || rest == ".") return base;
  return base == "/" ? absl::StrCat("/", rest) : absl::StrCat(base, "/", rest);
}

absl::Status AbsolutizeLocalPaths(proto::AttachRequest* request) {
  std::vector<char> buffer(4096);
  while (getcwd(buffer.data(), buffer.size()) == nullptr) {
    if (errno != ERANGE || buffer.size() > (1u << 20)) {
      return absl::InternalError(absl::StrCat(
          "cannot read the current directory to make relative paths absolute: ",
          std::strerror(errno), "; pass absolute paths for aggregate_dir and datasets"));
    }
    buffer.resize(buffer.size() * 2);
  }
  const std::string cwd(buffer.data());
  auto* rank = request->mutable_rank();
  rank->set_aggregate_dir(AbsoluteLocation(rank->aggregate_dir(), cwd));
  for (auto& d : *request->mutable_spec()->mutable_work_source()->mutable_datasets()) {
    d.set_path(AbsoluteLocation(d.path(), cwd));
  }
  return absl::OkStatus();
}

}  // namespace zephon::client

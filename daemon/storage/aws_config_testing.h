// Test helper for code that reads the AWS environment (aws_config.h, S3Store::Open): an
// AwsEnvSandbox clears every variable those read, points HOME at a fresh temporary
// directory, and puts the previous environment back when destroyed.
//
// Thread-safety: not thread-safe; it mutates the process environment (setenv), so use it
// only from single-threaded tests.
#ifndef ZEPHON_DAEMON_STORAGE_AWS_CONFIG_TESTING_H_
#define ZEPHON_DAEMON_STORAGE_AWS_CONFIG_TESTING_H_

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace zephon::storage {

class AwsEnvSandbox {
 public:
  AwsEnvSandbox() {
    for (const char* name : kVars) {
      const char* v = getenv(name);
      saved_.emplace_back(name, v == nullptr ? std::nullopt : std::optional<std::string>(v));
      unsetenv(name);
    }
    const char* tmp = getenv("TEST_TMPDIR");
    std::string templ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/aws_home_XXXXXX");
    if (mkdtemp(templ.data()) != nullptr) home_ = templ;
    setenv("HOME", home_.c_str(), 1);
  }
  ~AwsEnvSandbox() {
    for (const auto& [name, value] : saved_) {
      if (value.has_value()) {
        setenv(name, value->c_str(), 1);
      } else {
        unsetenv(name);
      }
    }
  }
  AwsEnvSandbox(const AwsEnvSandbox&) = delete;
  AwsEnvSandbox& operator=(const AwsEnvSandbox&) = delete;

  // The temporary $HOME ("" if it could not be created).
  const std::string& home() const { return home_; }

  void Set(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }

  // Writes `text` to `rel` under home (parents ~/.aws created); returns the full path.
  std::string WriteHomeFile(const std::string& rel, const std::string& text) const {
    mkdir(absl::StrCat(home_, "/.aws").c_str(), 0700);
    const std::string path = absl::StrCat(home_, "/", rel);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    return path;
  }

 private:
  static constexpr const char* kVars[] = {
      "HOME",           "AWS_PROFILE",           "AWS_SHARED_CREDENTIALS_FILE",
      "AWS_CONFIG_FILE", "AWS_ACCESS_KEY_ID",    "AWS_SECRET_ACCESS_KEY",
      "AWS_SESSION_TOKEN", "AWS_REGION",         "AWS_DEFAULT_REGION",
      "AWS_ENDPOINT_URL"};
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
  std::string home_;
};

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_AWS_CONFIG_TESTING_H_

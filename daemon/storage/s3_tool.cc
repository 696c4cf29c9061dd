// s3_tool: copies objects between local files and s3:// URLs through S3Store, for tests
// and operators. Endpoint, region and credentials come from the AWS_* environment and
// the AWS shared files (~/.aws/credentials, ~/.aws/config; see s3_store.h) unless given
// as flags.
//
//   s3_tool [flags] put LOCAL_FILE s3://bucket/key
//   s3_tool [flags] get s3://bucket/key LOCAL_FILE|-
//   s3_tool [flags] range s3://bucket/key OFFSET LENGTH LOCAL_FILE|-
//   s3_tool [flags] head s3://bucket/key          prints "SIZE<TAB>MTIME<TAB>ETAG"
//   s3_tool [flags] list s3://bucket[/prefix]     prints "SIZE<TAB>MTIME<TAB>KEY" lines
//   s3_tool [flags] ls-dir s3://bucket[/prefix]   one level (ListObjectsV2 delimiter=/):
//                                                 list's lines for the objects with no
//                                                 '/' after the prefix, then
//                                                 "PRE<TAB>-<TAB>COMMON_PREFIX" lines
//   s3_tool [flags] delete s3://bucket/key
// Flags: --endpoint=URL --region=R --path-style --virtual-host --page-size=N
//        --connect-timeout-ms=N --timeout-ms=N --attempts=N
//        --if-version=ETAG  (get, range) a conditional read: If-Match "ETAG" (the ETag
//                           as head prints it, without quotes); FAILED_PRECONDITION
//                           naming the object when it has another version
// Exit status: 0 on success, 1 on an S3 or file error (the status on stderr, e.g.
// "UNAVAILABLE: ... (after 3 attempts)" or "DATA_LOSS: ... BadDigest"), 2 on usage.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "daemon/storage/s3_store.h"

namespace zephon::storage {
namespace {

constexpr char kUsage[] =
    "usage: s3_tool [--endpoint=URL] [--region=R] [--path-style|--virtual-host]\n"
    "               [--page-size=N] [--connect-timeout-ms=N] [--timeout-ms=N] "
    "[--attempts=N]\n"
    "               [--if-version=ETAG]\n"
    "               put LOCAL s3://b/k | get s3://b/k LOCAL|- |\n"
    "               range s3://b/k OFFSET LENGTH LOCAL|- | head s3://b/k |\n"
    "               list s3://b[/prefix] | ls-dir s3://b[/prefix] | delete s3://b/k\n";

int Usage(const std::string& why) {
  std::cerr << "s3_tool: " << why << "\n" << kUsage;
  return 2;
}

absl::Status WriteOut(const std::string& path, const std::string& bytes) {
  if (path == "-") {
    std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::cout.flush();
    return std::cout ? absl::OkStatus() : absl::UnknownError("writing stdout failed");
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return absl::UnknownError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

absl::Status ReadIn(const std::string& path, std::string* bytes) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::ostringstream ss;
  ss << f.rdbuf();
  *bytes = ss.str();
  return absl::OkStatus();
}

std::string Iso8601(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

absl::Status Run(S3Options options, const std::string& if_version,
                 const std::vector<std::string>& args) {
  const std::string& cmd = args[0];
  const std::string& url = (cmd == "put") ? args[2] : args[1];
  absl::StatusOr<S3Location> loc = ParseS3Url(url);
  if (!loc.ok()) return loc.status();
  options.bucket = loc->bucket;
  absl::StatusOr<std::unique_ptr<S3Store>> store = S3Store::Open(options);
  if (!store.ok()) return store.status();
  S3Store& s = **store;
  if (cmd == "list") {
    absl::StatusOr<std::vector<ObjectInfo>> objects = s.List(loc->key);
    if (!objects.ok()) return objects.status();
    for (const ObjectInfo& o : *objects) {
      std::cout << o.size << "\t" << Iso8601(o.mtime) << "\t" << o.key << "\n";
    }
    return absl::OkStatus();
  }
  if (cmd == "ls-dir") {
    absl::StatusOr<DirectoryListing> level = s.ListDirectory(loc->key);
    if (!level.ok()) return level.status();
    for (const ObjectInfo& o : level->objects) {
      std::cout << o.size << "\t" << Iso8601(o.mtime) << "\t" << o.key << "\n";
    }
    for (const std::string& p : level->common_prefixes) std::cout << "PRE\t-\t" << p << "\n";
    return absl::OkStatus();
  }
  if (cmd == "put") {
    std::string bytes;
    if (absl::Status st = ReadIn(args[1], &bytes); !st.ok()) return st;
    return s.Put(loc->key, bytes);
  }
  if (cmd == "get") {
    absl::StatusOr<std::string> bytes = s.Get(loc->key, if_version);
    return bytes.ok() ? WriteOut(args[2], *bytes) : bytes.status();
  }
  if (cmd == "range") {
    uint64_t offset = 0, length = 0;
    if (!absl::SimpleAtoi(args[2], &offset) || !absl::SimpleAtoi(args[3], &length)) {
      return absl::InvalidArgumentError("range: OFFSET and LENGTH must be integers");
    }
    absl::StatusOr<std::string> bytes = s.GetRange(loc->key, offset, length, if_version);
    return bytes.ok() ? WriteOut(args[4], *bytes) : bytes.status();
  }
  if (cmd == "head") {
    absl::StatusOr<ObjectInfo> info = s.Head(loc->key);
    if (!info.ok()) return info.status();
    std::cout << info->size << "\t" << Iso8601(info->mtime) << "\t" << info->version << "\n";
    return absl::OkStatus();
  }
  return s.Delete(loc->key);  // "delete"
}

int Main(int argc, char** argv) {
  S3Options options;
  std::string if_version;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    int64_t n = 0;
    auto int_flag = [&](absl::string_view name, int64_t* out) {
      return absl::ConsumePrefix(&a, name) && absl::SimpleAtoi(a, out);
    };
    if (absl::ConsumePrefix(&a, "--endpoint=")) {
      options.endpoint = std::string(a);
    } else if (absl::ConsumePrefix(&a, "--region=")) {
      options.region = std::string(a);
    } else if (absl::ConsumePrefix(&a, "--if-version=")) {
      if_version = std::string(a);
      if (if_version.empty()) return Usage("--if-version needs an ETag");
    } else if (a == "--path-style") {
      options.path_style = true;
    } else if (a == "--virtual-host") {
      options.path_style = false;
    } else if (int_flag("--page-size=", &n)) {
      options.list_page_size = static_cast<int>(n);
    } else if (a = argv[i]; int_flag("--connect-timeout-ms=", &n)) {
      options.connect_timeout = absl::Milliseconds(n);
    } else if (a = argv[i]; int_flag("--timeout-ms=", &n)) {
      options.request_timeout = absl::Milliseconds(n);
    } else if (a = argv[i]; int_flag("--attempts=", &n)) {
      options.max_attempts = static_cast<int>(n);
    } else if (a = argv[i]; absl::StartsWith(a, "--")) {
      return Usage(absl::StrCat("unknown or malformed flag '", a, "'"));
    } else {
      args.emplace_back(argv[i]);
    }
  }
  if (args.empty()) return Usage("no command");
  const std::string& cmd = args[0];
  const size_t want = cmd == "put" || cmd == "get" ? 3
                      : cmd == "range"                ? 5
                      : cmd == "head" || cmd == "list" || cmd == "ls-dir" || cmd == "delete"
                          ? 2
                          : 0;
  if (want == 0) return Usage(absl::StrCat("unknown command '", cmd, "'"));
  if (args.size() != want) return Usage(absl::StrCat("wrong arguments for '", cmd, "'"));
  if (!if_version.empty() && cmd != "get" && cmd != "range") {
    return Usage(absl::StrCat("--if-version applies to get and range, not '", cmd, "'"));
  }
  const absl::Status st = Run(std::move(options), if_version, args);
  if (!st.ok()) {
    // Without payloads (a version mismatch carries one for IsVersionMismatch).
    std::cerr << "s3_tool " << cmd << ": "
              << st.ToString(absl::StatusToStringMode::kWithNoExtraData) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace zephon::storage

int main(int argc, char** argv) { return zephon::storage::Main(argc, argv); }

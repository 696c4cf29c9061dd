// AWS shared configuration as the AWS CLI reads it: credentials from the environment,
// the shared credentials file and the config file, plus the profile's region from the
// config file. S3Store::Open (s3_store.h) uses it to fill what S3Options leave empty.
//
// Files: $AWS_SHARED_CREDENTIALS_FILE else ~/.aws/credentials (sections "[NAME]");
// $AWS_CONFIG_FILE else ~/.aws/config ("[profile NAME]", "[default]"; other sections
// skipped); a leading "~/" is expanded from $HOME. Profile: $AWS_PROFILE else
// "default". A missing file is empty; only a profile named by AWS_PROFILE that neither
// file has is an error.
//
// Which files are read (a file that cannot matter cannot fail the load): with
// AWS_PROFILE both; otherwise the credentials file only while credentials are still
// needed (not when the environment or the caller has a key pair), the config file only
// for a needed region or credentials found nowhere else. A malformed file is an error
// only when it is read.
//
// Credential precedence (the CLI's; the session token comes from the same place as the
// key pair): 1. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), 2. the
// credentials file's profile, 3. the config file's profile. A half key pair is an error
// naming its source. Region comes from the config file only; AWS_REGION and
// AWS_DEFAULT_REGION are S3Store::Open's business.
//
// Thread-safety: ParseAwsIni is a pure function. LoadAwsSharedConfig reads the process
// environment (getenv) and files; do not call it while another thread modifies the
// environment.
#ifndef ZEPHON_DAEMON_STORAGE_AWS_CONFIG_H_
#define ZEPHON_DAEMON_STORAGE_AWS_CONFIG_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/storage/sigv4.h"

namespace zephon::storage {

// Profile name -> lowercase key -> value.
using AwsIniProfiles = std::map<std::string, std::map<std::string, std::string>>;

enum class AwsIniKind {
  kCredentials,  // "[NAME]" is profile NAME
  kConfig,       // "[profile NAME]" and "[default]"; other sections skipped
};

// Parses one shared file's text in the INI dialect of Python's configparser, which the
// CLI uses: '#' and ';' full-line comments; "key = value" or "key: value", trimmed;
// keys case-insensitive, sections case-sensitive; lines indented deeper than the
// previous key continue its value (nested "s3 =" blocks) and are ignored; inline
// comments are kept in the value. INVALID_ARGUMENT naming file_name:line for a key
// outside a section, a line that is none of these, and a repeated section or key (in
// the config file "[default]" and "[profile default]" both name "default" and merge,
// later keys winning). `file_name` is only used in error messages.
absl::StatusOr<AwsIniProfiles> ParseAwsIni(absl::string_view text,
                                           absl::string_view file_name, AwsIniKind kind);

struct AwsSharedConfig {
  std::string profile;             // the resolved profile name
  SigV4Credentials credentials;    // empty access_key when no source has any
  // Where the credentials came from, for messages: "environment",
  // "/root/.aws/credentials [default]", ...; "" when none.
  std::string credentials_source;
  std::string region;              // the config file's region for the profile, or ""
  std::string credentials_file;    // the paths searched ("" when $HOME is unset and
  std::string config_file;         //  no override is given)
};

// What the caller still lacks; the rest is not looked up (see "Which files are read").
struct AwsSharedConfigNeeds {
  bool credentials = true;  // false: the caller has a key pair; credentials stay empty
  bool region = true;       // false: the caller has a region; region may stay ""
};

// Resolves the profile, credentials and config-file region as described above.
// FAILED_PRECONDITION naming the profile and both files when AWS_PROFILE names a profile
// that neither file has; INVALID_ARGUMENT naming the source (environment, or file and
// profile) for a half-configured key pair; INVALID_ARGUMENT naming file:line for a
// malformed file that is read; PERMISSION_DENIED / UNKNOWN naming the file when it
// exists but cannot be read. No credentials anywhere is not an error here (the caller
// decides).
absl::StatusOr<AwsSharedConfig> LoadAwsSharedConfig(AwsSharedConfigNeeds needs = {});

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_AWS_CONFIG_H_

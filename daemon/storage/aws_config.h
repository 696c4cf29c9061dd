// AWS shared configuration as the AWS CLI reads it: credentials from the standard
// environment variables, the shared credentials file and the config file, plus the
// profile's region from the config file. S3Store::Open uses it to fill what S3Options
// leave empty.
//
// Files and profile:
//   credentials file  $AWS_SHARED_CREDENTIALS_FILE, else $HOME/.aws/credentials;
//                     sections are "[NAME]".
//   config file       $AWS_CONFIG_FILE, else $HOME/.aws/config; sections are
//                     "[profile NAME]" and "[default]" (other sections such as
//                     "[sso-session x]" are skipped, as the CLI does).
//   profile           $AWS_PROFILE, else "default".
// A leading "~/" in either path is expanded from $HOME. A missing file is treated as
// empty; only an explicitly requested profile (AWS_PROFILE set) that neither file has is
// an error.
//
// Which files are read (so that a file that cannot matter cannot fail the load):
//   AWS_PROFILE set      both files (the named profile must exist in one of them).
//   otherwise            the credentials file only while credentials are still needed:
//                        not when AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY are both set
//                        (the environment wins) or the caller has its own; the config
//                        file only for a needed region, or for credentials that neither
//                        the environment nor the credentials file has.
// A malformed or unreadable file is an error only when it is read.
//
// Credential precedence (the AWS CLI's; the session token always comes from the same
// place as the key pair, never mixed):
//   1. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN)
//   2. the credentials file's profile: aws_access_key_id, aws_secret_access_key,
//      aws_session_token
//   3. the config file's profile, same keys
// A source with a key id but no secret (or the reverse) is an error naming it, not a
// silent fall-through. Region comes from the config file only (the CLI ignores "region"
// in the credentials file); the AWS_REGION / AWS_DEFAULT_REGION variables are the
// caller's business (see S3Store::Open).
//
// File syntax (the INI dialect of Python's configparser, which the CLI uses): blank
// lines and full-line comments starting with '#' or ';' are skipped; "key = value" or
// "key: value" with whitespace trimmed; key names are case-insensitive; section names are
// case-sensitive; lines indented deeper than the previous key line continue its value
// (the CLI's nested "s3 =\n  max_concurrent_requests = 10" blocks) and are ignored here.
// Inline comments are not stripped ("key = v # x" has value "v # x"), as in the CLI. A
// key outside any section, a line that is neither a section, a key nor a continuation,
// and a repeated section or key are INVALID_ARGUMENT naming file:line.
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

// Parses one shared file's text; `file_name` is only used in error messages. As in the
// CLI, a section header or a key repeated within one section is an error; in the config
// file "[default]" and "[profile default]" both name "default" and merge (later keys
// win).
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

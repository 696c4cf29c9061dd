#include "daemon/storage/aws_config.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace zephon::storage {
namespace {

std::string GetEnv(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// `value` of env var `var`, else `fallback`; "~/" expanded from $HOME. "" when the path
// needs $HOME and it is unset.
std::string SharedFilePath(const char* var, absl::string_view fallback) {
  std::string path = GetEnv(var);
  if (path.empty()) path = std::string(fallback);
  if (path == "~" || absl::StartsWith(path, "~/")) {
    const std::string home = GetEnv("HOME");
    if (home.empty()) return "";
    path = absl::StrCat(home, path.substr(1));
  }
  return path;
}

// The file's bytes, or nullopt when it does not exist (or `path` is "").
absl::StatusOr<std::optional<std::string>> ReadIfExists(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return std::nullopt;
    const std::string what =
        absl::StrCat("cannot read AWS shared file '", path, "': ", std::strerror(err));
    if (err == EACCES || err == EPERM) {
      return absl::PermissionDeniedError(
          absl::StrCat(what, " (fix its permissions or point the AWS_* variable elsewhere)"));
    }
    return absl::UnknownError(what);
  }
  std::string text;
  char buf[8192];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) {
    return absl::UnknownError(
        absl::StrCat("cannot read AWS shared file '", path, "': ", std::strerror(err)));
  }
  return std::optional<std::string>(std::move(text));
}

absl::Status LineError(absl::string_view file, int line, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(file, ":", line, ": ", what,
                   " (AWS shared files are INI: '[section]' headers, then 'key = value' "
                   "lines)"));
}

// The profile a section header names, or nullopt for a section the file kind skips.
std::optional<std::string> ProfileOf(absl::string_view section, AwsIniKind kind) {
  if (kind == AwsIniKind::kCredentials) return std::string(section);
  if (section == "default") return std::string("default");
  absl::string_view rest = section;
  if (absl::ConsumePrefix(&rest, "profile") && !rest.empty() &&
      absl::ascii_isspace(static_cast<unsigned char>(rest.front()))) {
    rest = absl::StripAsciiWhitespace(rest);
    if (!rest.empty()) return std::string(rest);
  }
  return std::nullopt;
}

// Credentials from one profile of one file; nullopt when it names no key pair.
absl::StatusOr<std::optional<SigV4Credentials>> ProfileCredentials(
    const std::map<std::string, std::string>& values, const std::string& file,
    const std::string& profile) {
  auto get = [&values](const char* key) {
    auto it = values.find(key);
    return it == values.end() ? std::string() : it->second;
  };
  SigV4Credentials c;
  c.access_key = get("aws_access_key_id");
  c.secret_key = get("aws_secret_access_key");
  c.session_token = get("aws_session_token");
  if (c.session_token.empty()) c.session_token = get("aws_security_token");  // legacy
  if (c.access_key.empty() && c.secret_key.empty()) return std::nullopt;
  if (c.access_key.empty() || c.secret_key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AWS profile '", profile, "' in ", file, " has ",
        c.access_key.empty() ? "aws_secret_access_key but no aws_access_key_id"
                             : "aws_access_key_id but no aws_secret_access_key",
        ": set both keys in that profile"));
  }
  return std::optional<SigV4Credentials>(std::move(c));
}

}  // namespace

absl::StatusOr<AwsIniProfiles> ParseAwsIni(absl::string_view text,
                                           absl::string_view file_name, AwsIniKind kind) {
  AwsIniProfiles out;
  std::set<std::string> headers_seen;
  std::set<std::string> keys_seen;  // within the current section
  std::map<std::string, std::string>* section = nullptr;  // nullptr: skipped section
  bool in_section = false;
  // Indentation of the current section's last key line; -1 before the first key. A line
  // indented deeper continues that key's value (configparser's rule).
  int key_indent = -1;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::ConsumeSuffix(&raw, "\r");
    const absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    const int indent = static_cast<int>(raw.find_first_not_of(" \t"));
    if (key_indent >= 0 && indent > key_indent) continue;  // continuation: not needed here
    if (line.front() == '[') {
      if (line.back() != ']' || line.size() < 3) {
        return LineError(file_name, line_no,
                         absl::StrCat("malformed section header '", line, "'"));
      }
      const std::string header(absl::StripAsciiWhitespace(line.substr(1, line.size() - 2)));
      if (!headers_seen.insert(header).second) {
        return LineError(file_name, line_no,
                         absl::StrCat("section [", header, "] appears twice"));
      }
      const std::optional<std::string> profile = ProfileOf(header, kind);
      section = profile.has_value() ? &out[*profile] : nullptr;
      in_section = true;
      key_indent = -1;
      keys_seen.clear();
      continue;
    }
    const size_t delim = line.find_first_of("=:");
    if (delim == absl::string_view::npos) {
      return LineError(file_name, line_no,
                       absl::StrCat("expected 'key = value', got '", line, "'"));
    }
    const std::string key =
        absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, delim)));
    if (key.empty()) return LineError(file_name, line_no, "missing key before '='");
    if (!in_section) {
      return LineError(file_name, line_no,
                       absl::StrCat("key '", key, "' before any [section] header"));
    }
    if (!keys_seen.insert(key).second) {
      return LineError(file_name, line_no,
                       absl::StrCat("key '", key, "' appears twice in one section"));
    }
    key_indent = indent;
    if (section != nullptr) {
      (*section)[key] = std::string(absl::StripAsciiWhitespace(line.substr(delim + 1)));
    }
  }
  return out;
}

absl::StatusOr<AwsSharedConfig> LoadAwsSharedConfig(AwsSharedConfigNeeds needs) {
  AwsSharedConfig out;
  const std::string requested_profile = GetEnv("AWS_PROFILE");
  const bool named_profile = !requested_profile.empty();
  out.profile = named_profile ? requested_profile : "default";
  out.credentials_file = SharedFilePath("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials");
  out.config_file = SharedFilePath("AWS_CONFIG_FILE", "~/.aws/config");

  const std::string env_key = GetEnv("AWS_ACCESS_KEY_ID");
  const std::string env_secret = GetEnv("AWS_SECRET_ACCESS_KEY");
  const bool env_pair = !env_key.empty() && !env_secret.empty();
  if (needs.credentials && !env_pair && (!env_key.empty() || !env_secret.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        env_key.empty() ? "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is empty"
                        : "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is empty",
        ": set both, or unset both to use profile '", out.profile,
        "' from the AWS shared files"));
  }

  // The credentials file: for a named profile (which must exist), or for credentials
  // that the environment does not supply.
  AwsIniProfiles cred_profiles;
  std::optional<std::string> cred_text;
  if (named_profile || (needs.credentials && !env_pair)) {
    ASSIGN_OR_RETURN(cred_text, ReadIfExists(out.credentials_file));
    if (cred_text.has_value()) {
      ASSIGN_OR_RETURN(cred_profiles,
                       ParseAwsIni(*cred_text, out.credentials_file, AwsIniKind::kCredentials));
    }
  }
  const auto cred_it = cred_profiles.find(out.profile);
  const bool in_creds = cred_it != cred_profiles.end();
  if (needs.credentials && env_pair) {
    out.credentials = {env_key, env_secret, GetEnv("AWS_SESSION_TOKEN")};
    out.credentials_source = "environment";
  } else if (needs.credentials && in_creds) {
    ASSIGN_OR_RETURN(std::optional<SigV4Credentials> c,
                     ProfileCredentials(cred_it->second, out.credentials_file, out.profile));
    if (c.has_value()) {
      out.credentials = std::move(*c);
      out.credentials_source = absl::StrCat(out.credentials_file, " [", out.profile, "]");
    }
  }
  const bool need_config_credentials = needs.credentials && out.credentials.access_key.empty();

  // The config file: for a named profile, a needed region, or credentials still missing.
  AwsIniProfiles config_profiles;
  std::optional<std::string> config_text;
  if (named_profile || needs.region || need_config_credentials) {
    ASSIGN_OR_RETURN(config_text, ReadIfExists(out.config_file));
    if (config_text.has_value()) {
      ASSIGN_OR_RETURN(config_profiles,
                       ParseAwsIni(*config_text, out.config_file, AwsIniKind::kConfig));
    }
  }
  const auto config_it = config_profiles.find(out.profile);
  const bool in_config = config_it != config_profiles.end();
  if (named_profile && !in_creds && !in_config) {
    auto describe = [](const std::string& path, bool exists) {
      if (path.empty()) return std::string("(none: $HOME is unset)");
      return exists ? path : absl::StrCat(path, " (missing)");
    };
    return absl::FailedPreconditionError(absl::StrCat(
        "AWS profile '", out.profile, "' (from AWS_PROFILE) is in neither ",
        describe(out.credentials_file, cred_text.has_value()), " (as [", out.profile,
        "]) nor ", describe(out.config_file, config_text.has_value()), " (as [profile ",
        out.profile, "]): add it, or unset AWS_PROFILE to use 'default'"));
  }
  if (in_config) {
    auto it = config_it->second.find("region");
    if (it != config_it->second.end()) out.region = it->second;
  }
  if (need_config_credentials && in_config) {
    ASSIGN_OR_RETURN(std::optional<SigV4Credentials> c,
                     ProfileCredentials(config_it->second, out.config_file, out.profile));
    if (c.has_value()) {
      out.credentials = std::move(*c);
      out.credentials_source =
          absl::StrCat(out.config_file, " [profile ", out.profile, "]");
    }
  }
  return out;
}

}  // namespace zephon::storage

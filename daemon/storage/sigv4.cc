#include "daemon/storage/sigv4.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/digest.h"

namespace zephon::storage {
namespace {

constexpr absl::string_view kAlgorithm = "AWS4-HMAC-SHA256";

bool IsUnreserved(unsigned char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

// Trims the ends and collapses internal runs of spaces to one space.
std::string CanonicalHeaderValue(absl::string_view v) {
  v = absl::StripAsciiWhitespace(v);
  std::string out;
  out.reserve(v.size());
  bool in_space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      if (!in_space) out.push_back(' ');
      in_space = true;
    } else {
      out.push_back(c);
      in_space = false;
    }
  }
  return out;
}

bool IsTimestamp(absl::string_view ts) {
  if (ts.size() != 16 || ts[8] != 'T' || ts[15] != 'Z') return false;
  for (size_t i = 0; i < 15; ++i) {
    if (i != 8 && !absl::ascii_isdigit(static_cast<unsigned char>(ts[i]))) return false;
  }
  return true;
}

}  // namespace

std::string AwsUriEncode(absl::string_view in, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(in.size() * 3);
  for (unsigned char c : in) {
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

std::string ContentMd5Base64(absl::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_md5(), nullptr);
  return absl::Base64Escape(absl::string_view(reinterpret_cast<const char*>(digest), len));
}

absl::StatusOr<SigV4Signature> SignV4(const SigV4Request& request, absl::string_view region,
                                      absl::string_view service,
                                      const SigV4Credentials& credentials,
                                      absl::string_view timestamp) {
  if (!IsTimestamp(timestamp)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SigV4 timestamp '", timestamp, "' is not yyyymmddThhmmssZ"));
  }
  if (request.method.empty()) return absl::InvalidArgumentError("SigV4: empty method");
  if (request.path.empty() || request.path.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("SigV4: path '", request.path, "' must start with '/'"));
  }
  if (region.empty()) return absl::InvalidArgumentError("SigV4: empty region");
  if (service.empty()) return absl::InvalidArgumentError("SigV4: empty service");
  if (credentials.access_key.empty() || credentials.secret_key.empty()) {
    return absl::InvalidArgumentError("SigV4: empty access key or secret key");
  }
  if (request.payload_sha256_hex.empty()) {
    return absl::InvalidArgumentError("SigV4: empty payload hash (use Sha256Hex(\"\"))");
  }

  // Headers: lowercase names, canonical values, stable sort by name, repeated names
  // joined with ',' in the order given.
  HeaderList headers;
  for (const auto& [name, value] : request.headers) {
    headers.emplace_back(absl::AsciiStrToLower(name), CanonicalHeaderValue(value));
  }
  auto find = [&headers](absl::string_view name) {
    return std::find_if(headers.begin(), headers.end(),
                        [name](const auto& h) { return h.first == name; });
  };
  if (find("host") == headers.end()) {
    return absl::InvalidArgumentError("SigV4: the host header is required");
  }
  if (auto it = find("x-amz-date"); it == headers.end()) {
    headers.emplace_back("x-amz-date", std::string(timestamp));
  } else if (it->second != timestamp) {
    return absl::InvalidArgumentError(absl::StrCat("SigV4: x-amz-date '", it->second,
                                                   "' != timestamp '", timestamp, "'"));
  }
  if (!credentials.session_token.empty() && find("x-amz-security-token") == headers.end()) {
    headers.emplace_back("x-amz-security-token", credentials.session_token);
  }
  std::stable_sort(headers.begin(), headers.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  HeaderList merged;
  for (auto& h : headers) {
    if (!merged.empty() && merged.back().first == h.first) {
      absl::StrAppend(&merged.back().second, ",", h.second);
    } else {
      merged.push_back(std::move(h));
    }
  }

  std::vector<std::string> names;
  std::string canonical_headers;
  for (const auto& [name, value] : merged) {
    names.push_back(name);
    absl::StrAppend(&canonical_headers, name, ":", value, "\n");
  }

  // Query: encode, then sort by encoded name and value.
  std::vector<std::pair<std::string, std::string>> query;
  for (const auto& [name, value] : request.query) {
    query.emplace_back(AwsUriEncode(name, false), AwsUriEncode(value, false));
  }
  std::sort(query.begin(), query.end());
  std::vector<std::string> query_parts;
  for (const auto& [name, value] : query) query_parts.push_back(absl::StrCat(name, "=", value));

  SigV4Signature out;
  out.signed_headers = absl::StrJoin(names, ";");
  out.canonical_request = absl::StrCat(
      request.method, "\n", AwsUriEncode(request.path, true), "\n",
      absl::StrJoin(query_parts, "&"), "\n", canonical_headers, "\n", out.signed_headers,
      "\n", request.payload_sha256_hex);

  const absl::string_view date = timestamp.substr(0, 8);
  const std::string scope = absl::StrCat(date, "/", region, "/", service, "/aws4_request");
  out.string_to_sign = absl::StrCat(kAlgorithm, "\n", timestamp, "\n", scope, "\n",
                                    Sha256Hex(out.canonical_request));

  std::string key = HmacSha256(absl::StrCat("AWS4", credentials.secret_key), date);
  key = HmacSha256(key, region);
  key = HmacSha256(key, service);
  key = HmacSha256(key, "aws4_request");
  out.signature = absl::BytesToHexString(HmacSha256(key, out.string_to_sign));
  out.authorization = absl::StrCat(kAlgorithm, " Credential=", credentials.access_key, "/",
                                   scope, ", SignedHeaders=", out.signed_headers,
                                   ", Signature=", out.signature);
  out.headers = std::move(merged);
  return out;
}

}  // namespace zephon::storage

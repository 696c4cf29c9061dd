#include "daemon/storage/sigv4.h"

#include <openssl/evp.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zephon::storage {
namespace {

bool IsUnreserved(unsigned char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

}  // namespace

void SignWithCurl(CURL* curl, absl::string_view region, const SigV4Credentials& credentials,
                  absl::string_view payload_sha256_hex, HeaderList* headers) {
  // "provider1:provider2:region:service": AWS4-HMAC-SHA256, x-amz-* headers.
  const std::string how = absl::StrCat("aws:amz:", region, ":s3");
  curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, how.c_str());  // curl copies the strings
  curl_easy_setopt(curl, CURLOPT_USERNAME, credentials.access_key.c_str());
  curl_easy_setopt(curl, CURLOPT_PASSWORD, credentials.secret_key.c_str());
  headers->emplace_back("x-amz-content-sha256", std::string(payload_sha256_hex));
  if (!credentials.session_token.empty()) {
    headers->emplace_back("x-amz-security-token", credentials.session_token);
  }
}

std::string CanonicalQuery(const HeaderList& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query) {
    encoded.emplace_back(AwsUriEncode(name, false), AwsUriEncode(value, false));
  }
  std::sort(encoded.begin(), encoded.end());
  return absl::StrJoin(encoded, "&", [](std::string* out, const auto& p) {
    absl::StrAppend(out, p.first, "=", p.second);
  });
}

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

}  // namespace zephon::storage

#include "common/digest.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/escaping.h"

namespace zephon {

std::string Sha256(absl::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), len);
}

std::string Sha256Hex(absl::string_view bytes) { return absl::BytesToHexString(Sha256(bytes)); }

std::string HmacSha256(absl::string_view key, absl::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &len);
  return std::string(reinterpret_cast<const char*>(mac), len);
}

}  // namespace zephon

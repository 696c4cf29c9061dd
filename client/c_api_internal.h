// Helpers shared by the files that implement c_api.h (not part of the C ABI).
#ifndef ZEPHON_CLIENT_C_API_INTERNAL_H_
#define ZEPHON_CLIENT_C_API_INTERNAL_H_

#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace zephon::client::c_api {

// A malloc'ed, NUL-terminated copy of `s` for the caller to zephon_free.
inline char* Dup(absl::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) return nullptr;
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

// The C ABI's failure convention: *error (when not NULL) gets the message, the
// return value is the status code.
inline int Fail(const absl::Status& status, char** error) {
  if (error != nullptr) *error = Dup(status.message());
  return static_cast<int>(status.code());
}

inline std::string OrEmpty(const char* s) { return s == nullptr ? std::string() : std::string(s); }

}  // namespace zephon::client::c_api

#endif  // ZEPHON_CLIENT_C_API_INTERNAL_H_

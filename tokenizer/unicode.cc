#include "tokenizer/unicode.h"

#include <array>

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include "absl/strings/str_cat.h"

namespace zephon::tokenizer {
namespace {

uint8_t ComputeClass(char32_t cp) {
  const int8_t type = u_charType(static_cast<UChar32>(cp));
  uint8_t bits = 0;
  switch (type) {
    case U_UPPERCASE_LETTER:
    case U_TITLECASE_LETTER:
      bits |= kLetter | kUpperish | kWordish;
      break;
    case U_LOWERCASE_LETTER:
      bits |= kLetter | kLower | kWordish;
      break;
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      bits |= kLetter | kWordish;
      break;
    case U_DECIMAL_DIGIT_NUMBER:
      bits |= kNumber | kWordish;
      break;
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      bits |= kNumber;
      break;
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
      bits |= kMark | kWordish;
      break;
    case U_CONNECTOR_PUNCTUATION:
      bits |= kWordish;
      break;
    default:
      break;
  }
  if (u_isUWhiteSpace(static_cast<UChar32>(cp))) bits |= kSpace;
  if (type == U_LETTER_NUMBER && u_isUAlphabetic(static_cast<UChar32>(cp))) bits |= kWordish;
  return bits;
}

const std::array<uint8_t, 128>& AsciiClasses() {
  static const std::array<uint8_t, 128> table = [] {
    std::array<uint8_t, 128> t{};
    for (char32_t c = 0; c < 128; ++c) t[c] = ComputeClass(c);
    return t;
  }();
  return table;
}

}  // namespace

uint8_t ClassOf(char32_t cp) {
  if (cp < 128) return AsciiClasses()[cp];
  return ComputeClass(cp);
}

// Length of the valid UTF-8 sequence at s[i], or 0 when it is invalid. For an invalid one,
// *maximal is the length of its maximal valid prefix (at least 1), the unit Python replaces.
static int ValidSequenceAt(std::string_view s, size_t i, int* maximal) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  *maximal = 1;
  if (c < 0x80) return 1;
  int need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (int k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return 0;
    const unsigned char t = b(i + k);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (t < l || t > h) return 0;
    *maximal = k + 1;
  }
  return need + 1;
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) { ++i; continue; }
    int maximal;
    const int n = ValidSequenceAt(s, i, &maximal);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string ReplaceInvalidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    int maximal;
    const int n = ValidSequenceAt(s, i, &maximal);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += maximal;
    }
  }
  return out;
}

bool HasNormalizationBoundaryBefore(NormalForm form, char32_t cp) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* norm = form == NormalForm::kNfc ? icu::Normalizer2::getNFCInstance(err)
                                                          : icu::Normalizer2::getNFKCInstance(err);
  // Without ICU's data no cut is claimed safe (Normalize then reports the error).
  return U_SUCCESS(err) && norm->hasBoundaryBefore(static_cast<UChar32>(cp));
}

absl::Status Normalize(NormalForm form, std::string_view s, std::string* out) {
  bool ascii = true;
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) { ascii = false; break; }
  }
  if (ascii) {
    out->append(s);
    return absl::OkStatus();
  }
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* norm = form == NormalForm::kNfc ? icu::Normalizer2::getNFCInstance(err)
                                                          : icu::Normalizer2::getNFKCInstance(err);
  if (U_FAILURE(err)) {
    return absl::InternalError(absl::StrCat("ICU normalizer unavailable: ", u_errorName(err)));
  }
  icu::StringByteSink<std::string> sink(out);
  norm->normalizeUTF8(0, icu::StringPiece(s.data(), static_cast<int32_t>(s.size())), sink,
                      nullptr, err);
  if (U_FAILURE(err)) {
    return absl::InternalError(absl::StrCat("ICU normalization failed: ", u_errorName(err)));
  }
  return absl::OkStatus();
}

}  // namespace zephon::tokenizer

#include "tokenizer/decoder.h"

#include <array>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/utf8.h"
#include "tokenizer/unicode.h"

namespace zephon::tokenizer {
namespace {

struct ByteLevelTables {
  std::array<std::string, 256> byte_to_char;
  std::array<int32_t, 324> char_to_byte;  // every mapped code point is below 324
};

const ByteLevelTables& Tables() {
  static const ByteLevelTables tables = [] {
    ByteLevelTables t;
    t.char_to_byte.fill(-1);
    // Printable Latin-1 bytes stand for themselves; the rest take 256, 257, ... in order.
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                             (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? b : 256 + extra++;
      zephon::AppendUtf8(cp, &t.byte_to_char[b]);
      t.char_to_byte[cp] = b;
    }
    return t;
  }();
  return tables;
}

std::vector<char32_t> CodePoints(const std::string& s) {
  std::vector<char32_t> cps;
  size_t i = 0;
  while (i < s.size()) {
    int len;
    cps.push_back(DecodeUtf8(s, i, &len));
    i += len;
  }
  return cps;
}

std::string FromCodePoints(const std::vector<char32_t>& cps, size_t begin, size_t end) {
  std::string s;
  for (size_t i = begin; i < end; ++i) zephon::AppendUtf8(cps[i], &s);
  return s;
}

std::vector<std::string> ApplyStep(const DecoderStep& step, std::vector<std::string> tokens) {
  std::vector<std::string> out;
  switch (step.kind) {
    case DecoderStep::Kind::kByteLevel: {
      std::string bytes;
      for (const std::string& t : tokens) {
        std::string mapped;
        bool all = true;
        for (char32_t cp : CodePoints(t)) {
          const int b = ByteOfByteLevelChar(cp);
          if (b < 0) { all = false; break; }
          mapped.push_back(static_cast<char>(b));
        }
        bytes += all ? mapped : t;
      }
      out.push_back(ReplaceInvalidUtf8(bytes));
      break;
    }
    case DecoderStep::Kind::kReplace:
      for (std::string& t : tokens) {
        if (!step.pattern.empty()) absl::StrReplaceAll({{step.pattern, step.content}}, &t);
        out.push_back(std::move(t));
      }
      break;
    case DecoderStep::Kind::kByteFallback: {
      std::string pending;
      auto flush = [&] {
        if (pending.empty()) return;
        if (IsValidUtf8(pending)) {
          out.push_back(pending);
        } else {
          for (size_t k = 0; k < pending.size(); ++k) out.push_back("\xEF\xBF\xBD");
        }
        pending.clear();
      };
      for (std::string& t : tokens) {
        int byte = -1;
        if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
          char* end = nullptr;
          const std::string hex = t.substr(3, 2);
          const long v = std::strtol(hex.c_str(), &end, 16);
          if (end == hex.c_str() + 2) byte = static_cast<int>(v);
        }
        if (byte >= 0) {
          pending.push_back(static_cast<char>(byte));
        } else {
          flush();
          out.push_back(std::move(t));
        }
      }
      flush();
      break;
    }
    case DecoderStep::Kind::kFuse:
      out.push_back(absl::StrJoin(tokens, ""));
      break;
    case DecoderStep::Kind::kStrip: {
      const char32_t ch = CodePoints(step.content).empty() ? 0 : CodePoints(step.content)[0];
      for (const std::string& t : tokens) {
        const std::vector<char32_t> cps = CodePoints(t);
        size_t begin = 0, end = cps.size();
        for (int k = 0; k < step.start && begin < end && cps[begin] == ch; ++k) ++begin;
        for (int k = 0; k < step.stop && end > begin && cps[end - 1] == ch; ++k) --end;
        out.push_back(FromCodePoints(cps, begin, end));
      }
      break;
    }
    case DecoderStep::Kind::kMetaspace: {
      const char32_t rep = CodePoints(step.content).empty() ? 0 : CodePoints(step.content)[0];
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string s;
        for (char32_t cp : CodePoints(tokens[i])) {
          if (cp == rep) {
            if (i == 0 && step.prepend_scheme != DecoderStep::Prepend::kNever) continue;
            s.push_back(' ');
          } else {
            zephon::AppendUtf8(cp, &s);
          }
        }
        out.push_back(std::move(s));
      }
      break;
    }
  }
  return out;
}

}  // namespace

const std::string& ByteLevelChar(unsigned char b) { return Tables().byte_to_char[b]; }

int ByteOfByteLevelChar(char32_t cp) {
  return cp < Tables().char_to_byte.size() ? Tables().char_to_byte[cp] : -1;
}

std::string Decoder::Decode(std::vector<std::string> tokens) const {
  if (!present_) return absl::StrJoin(tokens, " ");
  for (const DecoderStep& step : steps_) tokens = ApplyStep(step, std::move(tokens));
  return absl::StrJoin(tokens, "");
}

}  // namespace zephon::tokenizer

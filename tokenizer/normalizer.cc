#include "tokenizer/normalizer.h"

#include "absl/strings/str_replace.h"
#include "tokenizer/unicode.h"

namespace zephon::tokenizer {
namespace {

bool IsNormalForm(NormalizerStep::Kind kind) {
  return kind == NormalizerStep::Kind::kNfc || kind == NormalizerStep::Kind::kNfkc;
}

NormalForm FormOf(NormalizerStep::Kind kind) {
  return kind == NormalizerStep::Kind::kNfc ? NormalForm::kNfc : NormalForm::kNfkc;
}

// Applies the steps to *text; Prepend only when `first`.
absl::Status ApplySteps(const std::vector<NormalizerStep>& steps, bool first, std::string* text) {
  for (const NormalizerStep& step : steps) {
    switch (step.kind) {
      case NormalizerStep::Kind::kNfc:
      case NormalizerStep::Kind::kNfkc: {
        std::string out;
        out.reserve(text->size());
        absl::Status s = Normalize(FormOf(step.kind), *text, &out);
        if (!s.ok()) return s;
        text->swap(out);
        break;
      }
      case NormalizerStep::Kind::kReplace:
        if (!step.pattern.empty()) absl::StrReplaceAll({{step.pattern, step.content}}, text);
        break;
      case NormalizerStep::Kind::kPrepend:
        // HF prepends only to a non-empty string.
        if (first && !text->empty()) text->insert(0, step.content);
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace

Normalizer::Normalizer(std::vector<NormalizerStep> steps) : steps_(std::move(steps)) {
  bool replaced = false;
  for (const NormalizerStep& step : steps_) {
    if (IsNormalForm(step.kind)) {
      ++normal_forms_;
      if (replaced) chunkable_ = false;
    }
    if (step.kind == NormalizerStep::Kind::kReplace) {
      replaced = true;
      int len = 0;
      if (!step.pattern.empty()) DecodeUtf8(step.pattern, 0, &len);
      if (static_cast<size_t>(len) != step.pattern.size() || step.content.empty()) {
        chunkable_ = false;
      }
    }
  }
}

absl::Status Normalizer::Apply(std::string* text) const {
  return ApplySteps(steps_, /*first=*/true, text);
}

bool Normalizer::SafeCutAt(std::string_view text, size_t pos) const {
  if (normal_forms_ == 0) return true;
  int len;
  const char32_t cp = DecodeUtf8(text, pos, &len);
  if (normal_forms_ > 1 && cp >= 0x80) return false;
  for (const NormalizerStep& step : steps_) {
    if (IsNormalForm(step.kind) && !HasNormalizationBoundaryBefore(FormOf(step.kind), cp)) {
      return false;
    }
  }
  return true;
}

absl::Status Normalizer::ApplyChunk(std::string_view chunk, bool first, std::string* out) const {
  std::string text(chunk);
  absl::Status s = ApplySteps(steps_, first, &text);
  if (!s.ok()) return s;
  out->append(text);
  return absl::OkStatus();
}

}  // namespace zephon::tokenizer

#include "tokenizer/normalizer.h"

#include "absl/strings/str_replace.h"
#include "tokenizer/unicode.h"

namespace zephon::tokenizer {

absl::Status Normalizer::Apply(std::string* text) const {
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::kNfc:
      case NormalizerStep::Kind::kNfkc: {
        std::string out;
        out.reserve(text->size());
        absl::Status s = Normalize(
            step.kind == NormalizerStep::Kind::kNfc ? NormalForm::kNfc : NormalForm::kNfkc,
            *text, &out);
        if (!s.ok()) return s;
        text->swap(out);
        break;
      }
      case NormalizerStep::Kind::kReplace:
        if (!step.pattern.empty()) absl::StrReplaceAll({{step.pattern, step.content}}, text);
        break;
      case NormalizerStep::Kind::kPrepend:
        // HF prepends only to a non-empty string.
        if (!text->empty()) text->insert(0, step.content);
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace zephon::tokenizer

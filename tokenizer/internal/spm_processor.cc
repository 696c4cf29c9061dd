#include "tokenizer/internal/spm_processor.h"

#include <sentencepiece_processor.h>

namespace zephon::tokenizer::internal {

SpmProcessor::SpmProcessor(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
    : sp_(std::move(sp)) {}

SpmProcessor::~SpmProcessor() = default;

std::unique_ptr<SpmProcessor> SpmProcessor::Load(std::string_view model_bytes,
                                                 std::string* error) {
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = sp->LoadFromSerializedProto(model_bytes);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return std::unique_ptr<SpmProcessor>(new SpmProcessor(std::move(sp)));
}

bool SpmProcessor::Encode(std::string_view text, std::vector<int>* ids,
                          std::string* error) const {
  const auto status = sp_->Encode(text, ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

bool SpmProcessor::Decode(const std::vector<int>& ids, std::string* text,
                          std::string* error) const {
  const auto status = sp_->Decode(ids, text);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

int SpmProcessor::piece_size() const { return sp_->GetPieceSize(); }
int SpmProcessor::bos_id() const { return sp_->bos_id(); }
int SpmProcessor::eos_id() const { return sp_->eos_id(); }

}  // namespace zephon::tokenizer::internal

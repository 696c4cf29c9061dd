// Loads a SentencePiece .model in a process that also links gRPC's protobuf (as zephond and
// libzephon_c.so do) and encodes stdin's lines: tests/tokenize checks it neither aborts nor
// differs from spm_encode. Usage: spm_in_grpc_process <model> < lines
#include <google/protobuf/stubs/common.h>

#include <iostream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: spm_in_grpc_process <model> < lines\n";
    return 2;
  }
  // Makes gRPC's libprotobuf a real dependency of this binary (--as-needed would drop it).
  std::cerr << "protobuf runtime "
            << google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION) << "\n";
  auto tokenizer = zephon::tokenizer::Tokenizer::Load(argv[1]);
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status() << "\n";
    return 1;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<int32_t> ids;
    const auto status = (*tokenizer)->Encode(line, zephon::tokenizer::SpecialTokens::kNone, &ids);
    if (!status.ok()) {
      std::cerr << status << "\n";
      return 1;
    }
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
    std::cout << "\n";
  }
  return 0;
}

// Replays a fuzz target over its committed corpus: the `make test` regression run of
// the libFuzzer targets (tests/fuzz/BUILD links one *_fuzzer.cc with this main).
//
// Usage: <binary> PATH...   Each PATH is a file or a directory (read recursively, files
// in name order). Every file's bytes go to LLVMFuzzerTestOneInput once. Exit status 0
// when every input ran; 1 when a PATH is missing or holds no input, so a corpus that was
// not packaged fails loudly instead of passing empty. A violated invariant aborts.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::filesystem::path> InputsUnder(const std::filesystem::path& root,
                                               std::error_code* ec) {
  std::vector<std::filesystem::path> out;
  if (std::filesystem::is_regular_file(root, *ec)) {
    out.push_back(root);
    return out;
  }
  for (auto it = std::filesystem::recursive_directory_iterator(root, *ec);
       !*ec && it != std::filesystem::recursive_directory_iterator(); it.increment(*ec)) {
    if (it->is_regular_file()) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 1;
  }
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    const std::vector<std::filesystem::path> inputs = InputsUnder(argv[i], &ec);
    if (ec || inputs.empty()) {
      std::fprintf(stderr, "%s: no corpus inputs found (%s); is the corpus packaged as data?\n",
                   argv[i], ec ? ec.message().c_str() : "empty");
      return 1;
    }
    for (const std::filesystem::path& path : inputs) {
      std::ifstream in(path, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "%s: cannot read\n", path.c_str());
        return 1;
      }
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    }
    std::printf("%s: %zu inputs ran\n", argv[i], inputs.size());
  }
  return 0;
}

#include "daemon/pipeline/formats/testing_corpus.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <zlib.h>
#include <zstd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace zephon::pipeline::testing {
namespace {

size_t CodeWidth(uint8_t code) {
  switch (code) {
    case 1: case 2: return 1;
    case 3: case 8: return 2;
    case 4: case 7: return 4;
    default: return 8;
  }
}

template <typename T>
void Put(T v, std::string* out) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void PutToken(int64_t v, size_t width, std::string* out) {
  for (size_t i = 0; i < width; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

class MemoryShard final : public ShardReader {
 public:
  MemoryShard(std::string name, std::vector<std::vector<int32_t>> docs)
      : name_(std::move(name)), docs_(std::move(docs)) {}
  std::string FileName() const override { return name_; }
  uint64_t ByteSize() const override {
    uint64_t n = 0;
    for (const auto& d : docs_) n += 4 * d.size();
    return n;
  }
  uint64_t NumSamples() const override { return docs_.size(); }
  uint64_t SampleLength(uint64_t index) const override { return docs_[index].size(); }
  absl::Status CopyTokens(uint64_t index, uint64_t offset, uint64_t count,
                          int32_t* out) const override {
    std::copy(docs_[index].begin() + offset, docs_[index].begin() + offset + count, out);
    return absl::OkStatus();
  }

 private:
  const std::string name_;
  const std::vector<std::vector<int32_t>> docs_;
};

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), bytes.size());
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteMegatronShard(const std::string& prefix,
                                const std::vector<std::vector<int32_t>>& docs,
                                uint8_t dtype_code) {
  const size_t width = CodeWidth(dtype_code);
  std::string bin, idx("MMIDIDX\0\0", 9);
  Put<uint64_t>(1, &idx);
  Put<uint8_t>(dtype_code, &idx);
  Put<uint64_t>(docs.size(), &idx);
  Put<uint64_t>(docs.size() + 1, &idx);
  for (const auto& d : docs) Put<int32_t>(static_cast<int32_t>(d.size()), &idx);
  for (const auto& d : docs) {
    Put<int64_t>(static_cast<int64_t>(bin.size()), &idx);
    for (int32_t t : d) PutToken(t, width, &bin);
  }
  for (size_t i = 0; i <= docs.size(); ++i) Put<int64_t>(static_cast<int64_t>(i), &idx);
  if (auto s = WriteFile(prefix + ".bin", bin); !s.ok()) return s;
  return WriteFile(prefix + ".idx", idx);
}

absl::Status WriteFlatFile(const std::string& path, const std::vector<uint32_t>& tokens,
                           bool uint32) {
  std::string bytes;
  for (uint32_t t : tokens) PutToken(t, uint32 ? 4 : 2, &bytes);
  return WriteFile(path, bytes);
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  if (absl::EndsWith(path, ".zst")) {
    std::string out(ZSTD_compressBound(text.size()), '\0');
    const size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
    if (ZSTD_isError(n)) return absl::InternalError(ZSTD_getErrorName(n));
    out.resize(n);
    return WriteFile(path, out);
  }
  if (absl::EndsWith(path, ".gz")) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (f == nullptr) return absl::InternalError(absl::StrCat("cannot gzopen ", path));
    const int n = text.empty() ? 0 : gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    const int rc = gzclose(f);
    if (n != static_cast<int>(text.size()) || rc != Z_OK) {
      return absl::InternalError(absl::StrCat("cannot gzwrite ", path));
    }
    return absl::OkStatus();
  }
  return WriteFile(path, text);
}

std::shared_ptr<const Dataset> MakeMemoryDataset(
    const std::string& name, const std::vector<std::vector<std::vector<int32_t>>>& shards) {
  std::vector<std::unique_ptr<ShardReader>> readers;
  for (size_t s = 0; s < shards.size(); ++s) {
    readers.push_back(std::make_unique<MemoryShard>(absl::StrCat(name, "-", s), shards[s]));
  }
  return std::shared_ptr<const Dataset>(
      Dataset::FromShards(name, "memory", std::move(readers)).value());
}

std::shared_ptr<const Dataset> MakeSyntheticDataset(const std::string& name,
                                                    int dataset_tag, uint32_t num_shards,
                                                    uint32_t per_shard, uint32_t max_len) {
  std::vector<std::vector<std::vector<int32_t>>> shards(num_shards);
  for (uint32_t s = 0; s < num_shards; ++s) {
    for (uint32_t i = 0; i < per_shard; ++i) {
      const uint32_t len = 1 + (s * 7 + i * 3) % max_len;
      std::vector<int32_t> doc;
      for (uint32_t o = 0; o < len; ++o) {
        doc.push_back(dataset_tag * 1000000 + s * 10000 + i * 10 + o % 10);
      }
      shards[s].push_back(doc);
    }
  }
  return MakeMemoryDataset(name, shards);
}

std::string MakeTempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::filesystem::path dir = std::filesystem::path(base ? base : "/tmp") / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

proto::PipelineSpec SpecOverDatasets(const std::vector<std::string>& names) {
  proto::PipelineSpec spec;
  for (const std::string& name : names) {
    proto::DatasetSpec* d = spec.mutable_work_source()->add_datasets();
    d->set_name(name);
    d->set_path("/unused/" + name);
    d->set_format("megatron");
  }
  return spec;
}

}  // namespace zephon::pipeline::testing

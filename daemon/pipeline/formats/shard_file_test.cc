#include "daemon/pipeline/formats/shard_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "daemon/pipeline/formats/flat_reader.h"
#include "daemon/pipeline/formats/jsonl_reader.h"
#include "daemon/pipeline/formats/megatron_reader.h"
#include "daemon/pipeline/formats/testing_corpus.h"

namespace zephon::pipeline {
namespace {

std::string WriteBytes(const std::string& path, size_t n) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(i * 31);
  FILE* f = fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  fwrite(bytes.data(), 1, bytes.size(), f);
  fclose(f);
  return bytes;
}

// What a data-sync job rewriting a file in place does to the daemon's open files.
void Shrink(const std::string& path, off_t bytes) {
  ASSERT_EQ(truncate(path.c_str(), bytes), 0) << path;
}

class LocalShardFileTest : public ::testing::Test {
 protected:
  std::string dir_ = testing::MakeTempDir("local_shard_file");
};

TEST_F(LocalShardFileTest, ReadsAnyRangeAndIsNotResident) {
  const std::string path = dir_ + "/tokens.bin";
  const std::string bytes = WriteBytes(path, 100000);
  auto file = OpenLocalShardFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->size(), 100000u);
  EXPECT_EQ((*file)->path(), path);
  EXPECT_EQ((*file)->data(), nullptr);
  std::string out(5000, '\0');
  ASSERT_TRUE((*file)->ReadAt(90000, 5000, out.data()).ok());
  EXPECT_EQ(out, bytes.substr(90000, 5000));
  std::string scratch;
  auto view = (*file)->View(99990, 10, &scratch);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(*view, bytes.substr(99990, 10));
  const absl::Status past = (*file)->ReadAt(99990, 11, out.data());
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
}

TEST_F(LocalShardFileTest, FileTruncatedWhileOpenIsDataLossNamingFileAndOffset) {
  const std::string path = dir_ + "/rewritten.bin";
  const std::string bytes = WriteBytes(path, 1 << 20);
  auto file = OpenLocalShardFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  Shrink(path, 4096);
  std::string out(8192, '\0');
  // Bytes still there read as before.
  ASSERT_TRUE((*file)->ReadAt(0, 4096, out.data()).ok());
  EXPECT_EQ(out.substr(0, 4096), bytes.substr(0, 4096));
  // Bytes gone are an error naming the file and where it now ends: not a signal.
  const absl::Status gone = (*file)->ReadAt(65536, 8192, out.data());
  EXPECT_EQ(gone.code(), absl::StatusCode::kDataLoss) << gone;
  EXPECT_TRUE(absl::StrContains(gone.message(), path)) << gone;
  EXPECT_TRUE(absl::StrContains(gone.message(), "truncated")) << gone;
  EXPECT_TRUE(absl::StrContains(gone.message(), "byte offset 65536")) << gone;
  // A range straddling the new end fails at the end.
  const absl::Status straddle = (*file)->ReadAt(2048, 4096, out.data());
  EXPECT_EQ(straddle.code(), absl::StatusCode::kDataLoss) << straddle;
  EXPECT_TRUE(absl::StrContains(straddle.message(), "byte offset 4096")) << straddle;
}

TEST_F(LocalShardFileTest, SequentialAndRandomReadsAcrossReadAheadBlocksMatchTheFile) {
  const std::string a_path = dir_ + "/a.bin";
  const std::string b_path = dir_ + "/b.bin";
  const std::string a_bytes = WriteBytes(a_path, (1 << 20) + 123);
  std::string b_bytes = WriteBytes(b_path, 300000);
  for (char& c : b_bytes) c = static_cast<char>(c ^ 0x5a);
  {
    FILE* f = fopen(b_path.c_str(), "wb");
    fwrite(b_bytes.data(), 1, b_bytes.size(), f);
    fclose(f);
  }
  auto a = OpenLocalShardFile(a_path);
  auto b = OpenLocalShardFile(b_path);
  ASSERT_TRUE(a.ok() && b.ok());
  // Sequential pieces of odd sizes through several read-ahead blocks, interleaved with
  // another file and with random reads on the same thread.
  uint64_t a_pos = 0, b_pos = 0;
  std::string out;
  for (int i = 0; a_pos < a_bytes.size(); ++i) {
    const uint64_t n = std::min<uint64_t>(1000 + (i * 7919) % 9000, a_bytes.size() - a_pos);
    out.resize(n);
    ASSERT_TRUE((*a)->ReadAt(a_pos, n, out.data()).ok()) << a_pos;
    ASSERT_EQ(out, a_bytes.substr(a_pos, n)) << a_pos;
    a_pos += n;
    if (i % 5 == 0 && b_pos + 4000 <= b_bytes.size()) {
      out.resize(4000);
      ASSERT_TRUE((*b)->ReadAt(b_pos, 4000, out.data()).ok());
      ASSERT_EQ(out, b_bytes.substr(b_pos, 4000)) << b_pos;
      b_pos += 4000;
    }
    if (i % 11 == 0) {
      const uint64_t at = (i * 104729) % (a_bytes.size() - 5000);
      out.resize(5000);
      ASSERT_TRUE((*a)->ReadAt(at, 5000, out.data()).ok());
      ASSERT_EQ(out, a_bytes.substr(at, 5000)) << at;
    }
  }
  // A read larger than the read-ahead block goes straight through.
  out.resize(600000);
  ASSERT_TRUE((*a)->ReadAt(1000, 600000, out.data()).ok());
  EXPECT_EQ(out, a_bytes.substr(1000, 600000));
}

TEST_F(LocalShardFileTest, ASequentialReaderOfAShrunkFileGetsDataLossPastWhatItReadAhead) {
  const std::string path = dir_ + "/seq.bin";
  WriteBytes(path, 1 << 20);
  auto file = OpenLocalShardFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::string out(4096, '\0');
  ASSERT_TRUE((*file)->ReadAt(0, 4096, out.data()).ok());
  ASSERT_TRUE((*file)->ReadAt(4096, 4096, out.data()).ok());
  ASSERT_TRUE((*file)->ReadAt(8192, 4096, out.data()).ok());  // reads ahead
  Shrink(path, 8192);
  absl::Status s;
  uint64_t pos = 8192;
  for (; pos < (1 << 20) && s.ok(); pos += 4096) s = (*file)->ReadAt(pos, 4096, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), path)) << s;
  EXPECT_LE(pos, 8192u + (256u << 10) + 4096u);  // at most one read-ahead block later
}

TEST_F(LocalShardFileTest, OneContinuationReadsNoBlockAhead) {
  // A shuffled reader reads a document at a random place, then the rest of it (a packed
  // row split it): the continuation is read exactly, no 256 KiB block. Seen through a
  // shrink: with nothing read ahead, the next read finds the file's new end at once.
  const std::string path = dir_ + "/shuffled.bin";
  WriteBytes(path, 1 << 20);
  auto file = OpenLocalShardFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::string out(4096, '\0');
  ASSERT_TRUE((*file)->ReadAt(500000, 4096, out.data()).ok());  // a document
  ASSERT_TRUE((*file)->ReadAt(504096, 4096, out.data()).ok());  // its continuation
  Shrink(path, 504096 + 4096);
  const absl::Status s = (*file)->ReadAt(504096 + 4096, 4096, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;  // not served from a block
}

TEST_F(LocalShardFileTest, NonRegularFilesFailWithoutBlocking) {
  const std::string fifo = dir_ + "/planted.bin";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto file = OpenLocalShardFile(fifo);  // would block forever without O_NONBLOCK
  EXPECT_EQ(file.status().code(), absl::StatusCode::kFailedPrecondition) << file.status();
  EXPECT_EQ(OpenLocalShardFile(dir_ + "/missing.bin").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(LocalShardFileTest, MegatronBinTruncatedUnderTheReaderIsAnErrorNotSigbus) {
  const std::string prefix = dir_ + "/mega";
  std::vector<std::vector<int32_t>> docs;
  for (int d = 0; d < 64; ++d) docs.push_back(std::vector<int32_t>(2048, d));
  ASSERT_TRUE(testing::WriteMegatronShard(prefix, docs).ok());
  auto shard = MegatronShard::Open(prefix);
  ASSERT_TRUE(shard.ok()) << shard.status();
  Shrink(prefix + ".bin", 4096);
  std::vector<int32_t> out(2048);
  ASSERT_TRUE((*shard)->CopyTokens(0, 0, 2048, out.data()).ok());
  EXPECT_EQ(out[2047], 0);
  const absl::Status gone = (*shard)->CopyTokens(40, 0, 2048, out.data());
  EXPECT_EQ(gone.code(), absl::StatusCode::kDataLoss) << gone;
  EXPECT_TRUE(absl::StrContains(gone.message(), prefix + ".bin")) << gone;
  EXPECT_TRUE(absl::StrContains(gone.message(), "byte offset 163840")) << gone;
  // The index was read at Open: rewriting it later cannot reach the shard.
  Shrink(prefix + ".idx", 0);
  EXPECT_EQ((*shard)->NumSamples(), 64u);
  EXPECT_EQ((*shard)->SampleLength(63), 2048u);
}

TEST_F(LocalShardFileTest, FlatFileTruncatedUnderTheReaderIsAnErrorNotSigbus) {
  const std::string path = dir_ + "/flat.bin";
  ASSERT_TRUE(testing::WriteFlatFile(path, std::vector<uint32_t>(1 << 16, 7)).ok());
  auto shard = FlatShard::Open(path, TokenType::kUint16, 2048);
  ASSERT_TRUE(shard.ok()) << shard.status();
  Shrink(path, 0);
  std::vector<int32_t> out(2048);
  const absl::Status gone = (*shard)->CopyTokens(3, 0, 2048, out.data());
  EXPECT_EQ(gone.code(), absl::StatusCode::kDataLoss) << gone;
  EXPECT_TRUE(absl::StrContains(gone.message(), path)) << gone;
  EXPECT_TRUE(absl::StrContains(gone.message(), "byte offset 12288")) << gone;
}

TEST_F(LocalShardFileTest, JsonlTokenCacheTruncatedUnderTheReaderIsAnErrorNotSigbus) {
  const std::string path = dir_ + "/docs.jsonl";
  std::string text;
  for (int i = 0; i < 8; ++i) {
    text += "{\"input_ids\": [";
    for (int t = 0; t < 2000; ++t) text += (t ? "," : "") + std::to_string(i);
    text += "]}\n";
  }
  ASSERT_TRUE(testing::WriteTextFile(path, text).ok());
  auto shard = JsonlShard::Open(path, kDefaultJsonlField, dir_ + "/cache");
  ASSERT_TRUE(shard.ok()) << shard.status();
  Shrink((*shard)->cache_prefix() + ".tok", 4096);
  std::vector<int32_t> out(2000);
  const absl::Status gone = (*shard)->CopyTokens(7, 0, 2000, out.data());
  EXPECT_EQ(gone.code(), absl::StatusCode::kDataLoss) << gone;
  EXPECT_TRUE(absl::StrContains(gone.message(), (*shard)->cache_prefix() + ".tok")) << gone;
}

}  // namespace
}  // namespace zephon::pipeline

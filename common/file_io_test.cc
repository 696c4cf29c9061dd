#include "common/file_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "common/temp_dir_testing.h"
#include "gtest/gtest.h"

namespace zephon {
namespace {

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(ReadFileTest, ReturnsEveryByteOfALargeFile) {
  const std::string path = testing::MakeTempDir("file_io") + "/big";
  // Larger than one read() chunk, with NUL bytes: the whole file comes back unchanged.
  std::string bytes(200 * 1024 + 7, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31);
  Write(path, bytes);
  absl::StatusOr<std::string> read = ReadFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, bytes);
}

TEST(ReadFileTest, EmptyFileIsEmptyString) {
  const std::string path = testing::MakeTempDir("file_io") + "/empty";
  Write(path, "");
  absl::StatusOr<std::string> read = ReadFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "");
}

TEST(ReadFileTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = testing::MakeTempDir("file_io") + "/nope";
  absl::StatusOr<std::string> read = ReadFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find("cannot open " + path), std::string::npos)
      << read.status();
}

TEST(ReadFileTest, DirectoryIsAnErrorNamingThePath) {
  const std::string dir = testing::MakeTempDir("file_io");
  absl::StatusOr<std::string> read = ReadFile(dir);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find(dir), std::string::npos) << read.status();
}

}  // namespace
}  // namespace zephon

#include "daemon/attach_progress.h"

#include "gtest/gtest.h"

namespace zephon::daemon {
namespace {

using Snapshot = pipeline::ConversionProgress::Snapshot;

AttachWork Work(Snapshot conversions, uint64_t downloaded = 0) {
  return AttachWork{std::move(conversions), downloaded};
}

TEST(AttachProgressTest, ConvertingNamesTheFileAndTheRateSinceTheAttach) {
  Snapshot start{.text_bytes = 5'000'000, .files_done = 1, .active = 0, .current = ""};
  Snapshot now{.text_bytes = 25'000'000, .files_done = 3, .active = 2, .current = "/d/b.jsonl"};
  const proto::AttachProgress p = DescribeAttachProgress(Work(start), Work(now), absl::Seconds(2));
  EXPECT_DOUBLE_EQ(p.elapsed_s(), 2.0);
  EXPECT_EQ(p.tokenized_bytes(), 25'000'000u);  // daemon-wide: what the deadline watches
  EXPECT_EQ(p.tokenized_files(), 3u);
  EXPECT_EQ(p.converting_files(), 2u);
  EXPECT_NE(p.activity().find("/d/b.jsonl and 1 more"), std::string::npos) << p.activity();
  EXPECT_NE(p.activity().find("20.0 MB of text, 2 files done, 10.0 MB/s"), std::string::npos)
      << p.activity();
}

TEST(AttachProgressTest, IdleConversionsSayWhatTheAttachDoes) {
  Snapshot start{.text_bytes = 7, .files_done = 2, .active = 0, .current = ""};
  proto::AttachProgress p = DescribeAttachProgress(Work(start), Work(start), absl::Seconds(1));
  EXPECT_NE(p.activity().find("opening the pipeline"), std::string::npos) << p.activity();
  Snapshot later = start;
  later.files_done = 4;
  later.text_bytes = 2'000'007;
  p = DescribeAttachProgress(Work(start), Work(later), absl::Seconds(1));
  EXPECT_NE(p.activity().find("tokenized 2 files (2.0 MB of text)"), std::string::npos)
      << p.activity();
}

TEST(AttachProgressTest, DownloadsAdvanceTheProgressAndSaySo) {
  Snapshot idle{.text_bytes = 0, .files_done = 0, .active = 0, .current = ""};
  const proto::AttachProgress p =
      DescribeAttachProgress(Work(idle, 1'000'000), Work(idle, 9'000'000), absl::Seconds(4));
  EXPECT_EQ(p.downloaded_bytes(), 9'000'000u);  // daemon-wide: what the deadline watches
  EXPECT_NE(p.activity().find("downloading from the object store"), std::string::npos)
      << p.activity();
  EXPECT_NE(p.activity().find("8.0 MB since this attach began, 2.0 MB/s"), std::string::npos)
      << p.activity();
}

}  // namespace
}  // namespace zephon::daemon

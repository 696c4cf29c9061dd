#include "client/request_paths.h"

#include <unistd.h>

#include <gtest/gtest.h>

namespace zephon::client {
namespace {

TEST(AbsoluteLocation, RelativePathsJoinTheClientsCwd) {
  EXPECT_EQ(AbsoluteLocation("ckpt", "/home/u/job"), "/home/u/job/ckpt");
  EXPECT_EQ(AbsoluteLocation("./ckpt/a", "/home/u/job/"), "/home/u/job/ckpt/a");
  EXPECT_EQ(AbsoluteLocation(".", "/home/u/job"), "/home/u/job");
  EXPECT_EQ(AbsoluteLocation("ckpt", "/"), "/ckpt");
}

TEST(AbsoluteLocation, AbsolutePathsAndUrlsStayAsWritten) {
  EXPECT_EQ(AbsoluteLocation("", "/cwd"), "");
  EXPECT_EQ(AbsoluteLocation("/abs/dir", "/cwd"), "/abs/dir");
  EXPECT_EQ(AbsoluteLocation("s3://bucket/agg", "/cwd"), "s3://bucket/agg");
  EXPECT_EQ(AbsoluteLocation("file:///abs", "/cwd"), "file:///abs");
}

TEST(AbsolutizeLocalPaths, CoversAggregateDirAndDatasets) {
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  proto::AttachRequest request;
  request.mutable_rank()->set_aggregate_dir("agg");
  request.mutable_spec()->mutable_work_source()->add_datasets()->set_path("data/a");
  request.mutable_spec()->mutable_work_source()->add_datasets()->set_path("s3://b/x");
  ASSERT_TRUE(AbsolutizeLocalPaths(&request).ok());
  EXPECT_EQ(request.rank().aggregate_dir(), std::string(cwd) + "/agg");
  EXPECT_EQ(request.spec().work_source().datasets(0).path(), std::string(cwd) + "/data/a");
  EXPECT_EQ(request.spec().work_source().datasets(1).path(), "s3://b/x");
}

}  // namespace
}  // namespace zephon::client

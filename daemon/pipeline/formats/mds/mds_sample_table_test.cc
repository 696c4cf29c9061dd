#include "daemon/pipeline/formats/mds/mds_sample_table.h"

#include <optional>
#include <string>
#include <vector>

#include "daemon/pipeline/formats/mds/mds_test_util.h"
#include "gtest/gtest.h"

namespace zephon::pipeline::mds {
namespace {

using testing::GetU32;
using testing::Has;
using testing::PutU32;
using testing::ReadTestdata;

// testdata's columns, sorted: any (ndarray), ids (ndarray:uint16), n (int), text (str).
const std::vector<std::optional<uint64_t>> kSizes = {std::nullopt, std::nullopt, 8,
                                                     std::nullopt};

absl::StatusOr<MdsSampleTable> Parse(const std::string& bytes, uint64_t samples = 3) {
  return MdsSampleTable::Parse("s.mds", bytes, samples, kSizes);
}

TEST(MdsSampleTableTest, ColumnsOfStreamingsLayout) {
  const std::string shard = ReadTestdata("plain/shard.00000.mds");
  ASSERT_FALSE(shard.empty());
  auto table = Parse(shard);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->samples(), 3u);
  EXPECT_EQ(*table->Column(0, 3), "hello");
  EXPECT_EQ(*table->Column(1, 3), "");
  EXPECT_EQ(*table->Column(2, 3), "h\xc3\xa9llo w\xc3\xb6rld");
  EXPECT_EQ(*table->Column(1, 2), std::string("\x01\0\0\0\0\0\0\0", 8));  // n = 1, int64
}

void ExpectDataLoss(const absl::Status& s, absl::string_view part) {
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(Has(s.message(), "s.mds")) << s;
  EXPECT_TRUE(Has(s.message(), part)) << s;
}

TEST(MdsSampleTableTest, CorruptHeadersAreDataLoss) {
  const std::string shard = ReadTestdata("plain/shard.00000.mds");
  ExpectDataLoss(Parse(shard.substr(0, 3)).status(), "too few");
  ExpectDataLoss(Parse(shard, 4).status(), "holds 3 samples but the index says 4");
  ExpectDataLoss(Parse(shard.substr(0, 12)).status(), "sample offsets end at byte 20");
  ExpectDataLoss(Parse(shard.substr(0, shard.size() - 1)).status(), "past the shard's");

  std::string bad = shard;
  PutU32(&bad, 4 + 4 * 2, GetU32(shard, 4 + 4 * 1) - 1);  // sample 1 ends before it starts
  ExpectDataLoss(Parse(bad).status(), "sample 1 ends at byte");
  bad = shard;
  PutU32(&bad, 4, 8);  // sample 0 starts inside the offsets table
  ExpectDataLoss(Parse(bad).status(), "inside the offsets table");
  bad = shard;
  PutU32(&bad, 4 + 4 * 3, 0xfffffff0);  // the last offset past the end
  ExpectDataLoss(Parse(bad).status(), "past the shard's");
}

TEST(MdsSampleTableTest, CorruptSampleSizesAreDataLossNamingTheSample) {
  const std::string shard = ReadTestdata("plain/shard.00000.mds");
  const uint32_t sample1 = GetU32(shard, 8);
  std::string bad = shard;
  PutU32(&bad, sample1, 1000);  // column "any" of sample 1 claims 1000 bytes
  auto table = Parse(bad);
  ASSERT_TRUE(table.ok());
  EXPECT_TRUE(table->Column(0, 3).ok());
  ExpectDataLoss(table->Column(1, 0).status(), "sample 1: its columns' sizes add up");
  EXPECT_TRUE(table->Column(2, 0).ok());

  // A sample shorter than its sizes header: sample 1 emptied by moving offsets.
  bad = shard;
  PutU32(&bad, 8, GetU32(shard, 12) - 4);
  table = Parse(bad);
  ASSERT_TRUE(table.ok());
  ExpectDataLoss(table->Column(1, 0).status(), "sample 1");
  // A sizes entry near 2^32 must not wrap the sum.
  bad = shard;
  PutU32(&bad, sample1, 0xffffffff);
  PutU32(&bad, sample1 + 4, 0xffffffff);
  table = Parse(bad);
  ASSERT_TRUE(table.ok());
  ExpectDataLoss(table->Column(1, 1).status(), "sample 1");
}

TEST(MdsSampleTableTest, EmptyShard) {
  std::string empty(8, '\0');
  PutU32(&empty, 4, 8);
  auto table = Parse(empty, 0);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->samples(), 0u);
}

}  // namespace
}  // namespace zephon::pipeline::mds

#include "daemon/pipeline/formats/conversion_progress.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace zephon::pipeline {
namespace {

TEST(ConversionProgressTest, CountsGrowAndNameTheNewestFile) {
  ConversionProgress p;
  EXPECT_EQ(p.Get().active, 0u);
  EXPECT_EQ(p.Get().current, "");
  p.Begin("a.jsonl");
  p.Add(10);
  p.Begin("b.jsonl");
  p.Add(5);
  ConversionProgress::Snapshot s = p.Get();
  EXPECT_EQ(s.active, 2u);
  EXPECT_EQ(p.Active(), 2u);
  EXPECT_EQ(s.current, "b.jsonl");
  EXPECT_EQ(s.text_bytes, 15u);
  EXPECT_EQ(s.files_done, 0u);
  p.End();
  p.End();
  s = p.Get();
  EXPECT_EQ(s.active, 0u);
  EXPECT_EQ(s.current, "");
  EXPECT_EQ(s.files_done, 2u);
  EXPECT_EQ(s.text_bytes, 15u);  // never goes back
}

TEST(ConversionProgressTest, ConcurrentAddsAreAllCounted) {
  ConversionProgress p;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&p] {
      p.Begin("f");
      for (int i = 0; i < 1000; ++i) p.Add(3);
      p.End();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(p.Get().text_bytes, 12000u);
  EXPECT_EQ(p.Get().files_done, 4u);
  EXPECT_EQ(p.Get().active, 0u);
}

}  // namespace
}  // namespace zephon::pipeline

#include "daemon/tokenizers.h"

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_replace.h"
#include "common/temp_dir_testing.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/tokenize_spec.h"
#include "daemon/storage/fake_object_store_testing.h"
#include "tokenizer/tiny_tokenizer_testing.h"

namespace zephon::daemon {
namespace {

using ::zephon::tokenizer::kTinyLlama2Json;

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

proto::TokenizeSpec PathSpec(const std::string& path) {
  proto::TokenizeSpec t;
  t.set_tokenizer_path(path);
  EXPECT_TRUE(pipeline::ResolveTokenize(0, &t).ok());
  return t;
}

// A cache whose s3:// stores are `store` (rooted anywhere: the test checks the roots).
struct S3Fixture {
  std::shared_ptr<storage::FakeObjectStore> store = std::make_shared<storage::FakeObjectStore>();
  std::vector<std::string> roots;
  TokenizerCache cache{[this](const std::string& root)
                           -> absl::StatusOr<std::unique_ptr<storage::ObjectStore>> {
    roots.push_back(root);
    // A view of the shared fake: the cache owns what it is given.
    struct View final : storage::ObjectStore {
      std::shared_ptr<storage::FakeObjectStore> s;
      absl::StatusOr<std::string> Get(const std::string& k, const std::string& v = "") override {
        return s->Get(k, v);
      }
      absl::StatusOr<std::string> GetRange(const std::string& k, uint64_t o, uint64_t n,
                                           const std::string& v = "") override {
        return s->GetRange(k, o, n, v);
      }
      absl::Status Put(const std::string& k, std::string_view b) override { return s->Put(k, b); }
      absl::StatusOr<std::vector<storage::ObjectInfo>> List(const std::string& p) override {
        return s->List(p);
      }
      absl::StatusOr<storage::DirectoryListing> ListDirectory(const std::string& p) override {
        return s->ListDirectory(p);
      }
      absl::Status Delete(const std::string& k) override { return s->Delete(k); }
      absl::StatusOr<storage::ObjectInfo> Head(const std::string& k) override {
        return s->Head(k);
      }
    };
    auto view = std::make_unique<View>();
    view->s = store;
    return view;
  }};
};

TEST(TokenizerCacheTest, LoadsALocalFileOnceAndAgainWhenItChanges) {
  const std::string dir = testing::MakeTempDir("tok");
  const std::string path = dir + "/tokenizer.json";
  Write(path, kTinyLlama2Json);
  TokenizerCache cache(nullptr);
  auto a = cache.Get(PathSpec(path));
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = cache.Get(PathSpec(path));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(cache.stats().loads, 1u);
  EXPECT_EQ(cache.stats().hits, 1u);
  // The model directory is another source holding the same tokenizer.
  auto d = cache.Get(PathSpec(dir));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->fingerprint(), (*a)->fingerprint());
  // Options that change ids are part of the identity.
  proto::TokenizeSpec split = PathSpec(path);
  split.set_split_special_tokens(true);
  auto s = cache.Get(split);
  ASSERT_TRUE(s.ok());
  EXPECT_NE((*s)->fingerprint(), (*a)->fingerprint());
  // A rewritten file is loaded again (its size changed).
  Write(path, absl::StrReplaceAll(kTinyLlama2Json, {{R"("a b"])", R"("a b", "▁ b"])"},
                                                   {R"("ab": 7,)", R"("ab": 7, "▁b": 11,)"}}));
  auto c = cache.Get(PathSpec(path));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE((*c)->fingerprint(), (*a)->fingerprint());
  EXPECT_EQ(cache.stats().loads, 4u);
}

TEST(TokenizerCacheTest, ConcurrentGetsOfOneSourceLoadOnce) {
  const std::string path = testing::MakeTempDir("tok") + "/tokenizer.json";
  Write(path, kTinyLlama2Json);
  TokenizerCache cache(nullptr);
  std::vector<std::thread> threads;
  std::vector<const tokenizer::Tokenizer*> got(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] { got[i] = cache.Get(PathSpec(path)).value().get(); });
  }
  for (auto& t : threads) t.join();
  for (auto* p : got) EXPECT_EQ(p, got[0]);
  EXPECT_EQ(cache.stats().loads, 1u);
  EXPECT_EQ(cache.stats().hits, 7u);
}

TEST(TokenizerCacheTest, ErrorsNameThePathAndTheJsonPath) {
  const std::string dir = testing::MakeTempDir("tok");
  TokenizerCache cache(nullptr);
  auto missing = cache.Get(PathSpec(dir + "/nope.json"));
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir + "/nope.json"), std::string::npos)
      << missing.status();
  const std::string bad = dir + "/bad.json";
  Write(bad, absl::StrReplaceAll(kTinyLlama2Json, {{R"("type": "BPE")", R"("type": "Unigram")"}}));
  auto malformed = cache.Get(PathSpec(bad));
  ASSERT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(malformed.status().message().find("tokenizer '" + bad + "'"), std::string::npos)
      << malformed.status();
  EXPECT_NE(malformed.status().message().find("model.type 'Unigram' is not supported"),
            std::string::npos)
      << malformed.status();
  // Failures are not cached: fixed, the file loads.
  Write(bad, kTinyLlama2Json);
  EXPECT_TRUE(cache.Get(PathSpec(bad)).ok());
}

TEST(TokenizerCacheTest, InlineBytesAreTheirOwnIdentity) {
  TokenizerCache cache(nullptr);
  proto::TokenizeSpec t;
  t.set_tokenizer_json(kTinyLlama2Json);
  ASSERT_TRUE(pipeline::ResolveTokenize(0, &t).ok());
  auto a = cache.Get(t);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(cache.Get(t)->get(), a->get());
  t.set_tokenizer_config_json(R"({"bos_token": "</s>"})");
  auto b = cache.Get(t);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->bos_token_id(), 2);
  EXPECT_NE((*b)->fingerprint(), (*a)->fingerprint());
  t.set_tokenizer_json("{\"model\": 1}");
  auto bad = cache.Get(t);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(inline tokenizer.json)"), std::string::npos)
      << bad.status();
}

TEST(TokenizerCacheTest, ReadsS3FilesAndDirectoriesKeyedByETag) {
  S3Fixture s3;
  s3.store->Set("tok.json", kTinyLlama2Json, "e1");
  auto file = s3.cache.Get(PathSpec("s3://bucket/models/tok.json"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(s3.roots.back(), "s3://bucket/models");
  EXPECT_TRUE(s3.cache.Get(PathSpec("s3://bucket/models/tok.json")).ok());
  EXPECT_EQ(s3.cache.stats().loads, 1u);
  s3.store->Set("tok.json", kTinyLlama2Json, "e2");  // a new version: loaded again
  EXPECT_TRUE(s3.cache.Get(PathSpec("s3://bucket/models/tok.json")).ok());
  EXPECT_EQ(s3.cache.stats().loads, 2u);

  s3.store->Set("tokenizer.json", kTinyLlama2Json, "e3");
  s3.store->Set("tokenizer_config.json", R"({"bos_token": "</s>"})", "e4");
  auto dir = s3.cache.Get(PathSpec("s3://bucket/models/llama/"));
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(s3.roots.back(), "s3://bucket/models/llama");
  EXPECT_EQ((*dir)->bos_token_id(), 2);  // tokenizer_config.json was read

  S3Fixture empty;
  auto none = empty.cache.Get(PathSpec("s3://bucket/models/llama"));
  ASSERT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("'s3://bucket/models/llama' has no tokenizer.json"),
            std::string::npos)
      << none.status();
  auto no_file = empty.cache.Get(PathSpec("s3://bucket/models/tok.json"));
  ASSERT_EQ(no_file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(no_file.status().message().find("s3://bucket/models/tok.json"), std::string::npos)
      << no_file.status();
}

proto::PipelineSpec TextSpec(const std::string& tokenizer_json) {
  proto::PipelineSpec spec;
  auto* d = spec.mutable_work_source()->add_datasets();
  d->set_name("web");
  d->set_path("/data/web");
  d->set_format("jsonl");
  spec.add_operators()->mutable_tokenize()->set_tokenizer_json(tokenizer_json);
  spec.add_operators()->mutable_pack_flat()->set_max_length(2049);
  spec.add_operators()->mutable_batch()->set_microbatch_size(4);
  return pipeline::ResolveSpec(spec, 1).value();
}

TEST(PrepareTokenizeTest, SetsTheFingerprintAndDropsTheInlineBytes) {
  TokenizerCache cache(nullptr);
  // A tokenizer_config.json without bos_token: no BOS for bos_eos, refused at attach.
  proto::PipelineSpec no_bos = TextSpec(kTinyLlama2Json);
  no_bos.mutable_operators(0)->mutable_tokenize()->set_tokenizer_config_json("{}");
  auto refused = PrepareTokenize(cache, &no_bos);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("special_tokens='bos_eos'"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("asks for a BOS token"), std::string::npos);

  proto::PipelineSpec spec = TextSpec(kTinyLlama2Json);
  spec.mutable_operators(0)->mutable_tokenize()->set_tokenizer_config_json(
      R"({"bos_token": "<s>", "eos_token": "</s>"})");
  auto text = PrepareTokenize(cache, &spec);
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_TRUE(text->has_value());
  const proto::TokenizeSpec& t = spec.operators(0).tokenize();
  EXPECT_EQ(t.fingerprint(), (*text)->tokenizer->fingerprint());
  EXPECT_TRUE(t.tokenizer_json().empty());
  EXPECT_TRUE(t.tokenizer_config_json().empty());
  EXPECT_EQ((*text)->special_tokens, tokenizer::SpecialTokens::kBosEos);

  // No tokenize: nothing to do.
  proto::PipelineSpec plain = spec;
  plain.mutable_operators()->erase(plain.mutable_operators()->begin());
  auto none = PrepareTokenize(cache, &plain);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(PrepareTokenizeTest, RefusesAClientFingerprintOtherThanItsOwnNamingBoth) {
  TokenizerCache cache(nullptr);
  proto::PipelineSpec spec = TextSpec(kTinyLlama2Json);
  spec.mutable_operators(0)->mutable_tokenize()->set_fingerprint("sha256:0123");
  auto r = PrepareTokenize(cache, &spec);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string own = tokenizer::Tokenizer::FromJson(kTinyLlama2Json).value()->fingerprint();
  EXPECT_NE(r.status().message().find("fingerprint sha256:0123"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("zephond loaded fingerprint " + own), std::string::npos)
      << r.status();
  // The right one passes.
  spec.mutable_operators(0)->mutable_tokenize()->set_fingerprint(own);
  EXPECT_TRUE(PrepareTokenize(cache, &spec).ok());
}

}  // namespace
}  // namespace zephon::daemon

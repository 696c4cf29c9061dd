#include "daemon/pipeline/tokenize_spec.h"

#include <functional>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/spec.h"
#include "tokenizer/tiny_tokenizer_testing.h"

namespace zephon::pipeline {
namespace {

proto::PipelineSpec TextSpec() {
  proto::PipelineSpec spec;
  auto* d = spec.mutable_work_source()->add_datasets();
  d->set_name("web");
  d->set_path("/data/web");
  d->set_format("jsonl");
  spec.add_operators()->mutable_tokenize()->set_tokenizer_path("/models/tok/tokenizer.json");
  spec.add_operators()->mutable_pack_flat()->set_max_length(2049);
  spec.add_operators()->mutable_batch()->set_microbatch_size(4);
  return spec;
}

proto::TokenizeSpec* Tok(proto::PipelineSpec& spec) {
  return spec.mutable_operators(0)->mutable_tokenize();
}

void ExpectError(const proto::PipelineSpec& spec, const std::string& needle) {
  auto r = ResolveSpec(spec, 2);
  ASSERT_FALSE(r.ok()) << needle;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status();
}

TEST(ResolveTokenizeTest, FillsTheDefaults) {
  auto r = ResolvePipeline(TextSpec(), 2);
  ASSERT_TRUE(r.ok()) << r.status();
  const proto::TokenizeSpec& t = r->spec.operators(0).tokenize();
  EXPECT_EQ(t.field(), "text");
  EXPECT_EQ(t.special_tokens(), proto::TokenizeSpec::BOS_EOS);
  EXPECT_EQ(t.on_missing(), proto::TokenizeSpec::ERROR);
  EXPECT_FALSE(t.has_max_length());
  // The lanes read past it: pack_flat and batch are operators 1 and 2.
  EXPECT_EQ(r->lanes.max_length, 2049u);
  EXPECT_EQ(r->lanes.microbatch_size, 4u);
  EXPECT_EQ(ResolveSpec(r->spec, 2)->SerializeAsString(), r->spec.SerializeAsString());
  ASSERT_NE(FindTokenize(r->spec), nullptr);
  auto plain = TextSpec();
  plain.mutable_operators()->erase(plain.mutable_operators()->begin());
  EXPECT_EQ(FindTokenize(plain), nullptr);
}

TEST(ResolveTokenizeTest, RefusesBadValuesNamingOperatorAndValue) {
  auto edit = [](const std::function<void(proto::TokenizeSpec&)>& f) {
    auto s = TextSpec();
    f(*Tok(s));
    return s;
  };
  ExpectError(edit([](auto& t) { t.clear_tokenizer_path(); }), "operators[0] tokenize: no tokenizer");
  ExpectError(edit([](auto& t) { t.set_tokenizer_json("{}"); }),
              "both tokenizer_path ('/models/tok/tokenizer.json') and tokenizer_json (2 bytes)");
  ExpectError(edit([](auto& t) { t.set_tokenizer_config_json("{}"); }),
              "tokenizer_config_json goes with tokenizer_json only");
  ExpectError(edit([](auto& t) {
                t.set_truncation(true);
                t.set_split_long_samples(true);
                t.set_max_length(8);
              }),
              "truncation and split_long_samples are both set");
  ExpectError(edit([](auto& t) { t.set_truncation(true); }), "truncation needs max_length");
  ExpectError(edit([](auto& t) { t.set_split_long_samples(true); }),
              "split_long_samples needs max_length");
  ExpectError(edit([](auto& t) {
                t.set_truncation(true);
                t.set_max_length(0);
              }),
              "operators[0] tokenize: max_length 0");
  ExpectError(edit([](auto& t) { t.set_max_length(64); }),
              "max_length 64 without truncation or split_long_samples");
  ExpectError(edit([](auto& t) { t.set_special_tokens(static_cast<proto::TokenizeSpec::SpecialTokens>(42)); }),
              "operators[0] tokenize.special_tokens 42 unknown (bos_eos, bos, eos, none, "
              "tokenizer_default)");
  ExpectError(edit([](auto& t) { t.set_on_missing(static_cast<proto::TokenizeSpec::OnMissing>(7)); }),
              "operators[0] tokenize.on_missing 7 unknown (error, skip)");
  ExpectError(edit([](auto& t) { t.set_bos_token_id(-1); }), "bos_token_id -1 is not a token id");
  ExpectError(edit([](auto& t) { t.set_eos_token_id(-3); }), "eos_token_id -3 is not a token id");
}

TEST(ResolveTokenizeTest, TokenizeComesFirstAndReadsJsonlOnly) {
  auto late = TextSpec();
  auto* ops = late.mutable_operators();
  ops->SwapElements(0, 1);  // [pack_flat, tokenize, batch]
  ExpectError(late, "operators[1]: tokenize must be the first operator");
  auto twice = TextSpec();
  *twice.mutable_operators()->Add() = twice.operators(0);
  ExpectError(twice, "operators[3]: tokenize must be the first operator");
  auto megatron = TextSpec();
  megatron.mutable_work_source()->mutable_datasets(0)->set_format("megatron");
  ExpectError(megatron, "work_source.datasets[0] ('web').format 'megatron': the tokenize "
                        "operator reads text from JSONL datasets");
  auto automatic = TextSpec();  // auto-detected: Dataset::Open decides
  automatic.mutable_work_source()->mutable_datasets(0)->clear_format();
  EXPECT_TRUE(ResolveSpec(automatic, 2).ok());
}

TEST(TokenizeSpecHashTest, CoversFingerprintAndEveryOptionNotTheSource) {
  auto data = testing::MakeSyntheticDataset("web", 1, 2, 10, 5);
  auto hash = [&](const std::function<void(proto::TokenizeSpec&)>& f) {
    auto s = TextSpec();
    Tok(s)->set_fingerprint("sha256:aaaa");
    f(*Tok(s));
    return SpecHash(ResolveSpec(s, 2).value(), {data});
  };
  const std::string base = hash([](auto&) {});
  // Location and inline bytes are not data.
  EXPECT_EQ(hash([](auto& t) { t.set_tokenizer_path("s3://bucket/models/tok"); }), base);
  EXPECT_EQ(hash([](auto& t) {
              t.clear_tokenizer_path();
              t.set_tokenizer_json(std::string(1 << 20, ' '));
              t.set_tokenizer_config_json("{\"bos_token\": \"<s>\"}");
            }),
            base);
  // Spelling the defaults out is the same spec.
  EXPECT_EQ(hash([](auto& t) {
              t.set_field("text");
              t.set_special_tokens(proto::TokenizeSpec::BOS_EOS);
              t.set_on_missing(proto::TokenizeSpec::ERROR);
            }),
            base);
  const std::vector<std::function<void(proto::TokenizeSpec&)>> changes = {
      [](auto& t) { t.set_fingerprint("sha256:bbbb"); },
      [](auto& t) { t.set_field("content"); },
      [](auto& t) { t.set_special_tokens(proto::TokenizeSpec::EOS); },
      [](auto& t) { t.set_special_tokens(proto::TokenizeSpec::NONE); },
      [](auto& t) { t.set_bos_token_id(1); },
      [](auto& t) { t.set_eos_token_id(2); },
      [](auto& t) { t.set_truncation(true); t.set_max_length(8); },
      [](auto& t) { t.set_truncation(true); t.set_max_length(9); },
      [](auto& t) { t.set_split_long_samples(true); t.set_max_length(8); },
      [](auto& t) { t.set_split_special_tokens(true); },
      [](auto& t) { t.set_on_missing(proto::TokenizeSpec::SKIP); },
  };
  std::set<std::string> seen = {base};
  for (size_t i = 0; i < changes.size(); ++i) {
    EXPECT_TRUE(seen.insert(hash(changes[i])).second) << "change " << i << " left the hash";
  }
  // And without tokenize the spec is another one.
  auto plain = TextSpec();
  plain.mutable_operators()->erase(plain.mutable_operators()->begin());
  EXPECT_FALSE(seen.count(SpecHash(ResolveSpec(plain, 2).value(), {data})));
}

TEST(MakeTextTokenizationTest, CarriesTheResolvedOptions) {
  std::shared_ptr<const tokenizer::Tokenizer> tok =
      tokenizer::Tokenizer::FromJson(tokenizer::kTinyLlama2Json).value();
  auto s = TextSpec();
  Tok(s)->set_field("body");
  Tok(s)->set_special_tokens(proto::TokenizeSpec::EOS);
  Tok(s)->set_split_long_samples(true);
  Tok(s)->set_max_length(16);
  Tok(s)->set_on_missing(proto::TokenizeSpec::SKIP);
  const auto resolved = ResolveSpec(s, 1).value();
  auto text = MakeTextTokenization(*FindTokenize(resolved), tok);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->tokenizer, tok);
  EXPECT_EQ(text->field, "body");
  EXPECT_EQ(text->special_tokens, tokenizer::SpecialTokens::kEos);
  EXPECT_EQ(text->max_length, 16u);
  EXPECT_EQ(text->long_samples, TextTokenization::LongSamples::kSplit);
  EXPECT_TRUE(text->skip_missing);

  Tok(s)->set_split_long_samples(false);
  Tok(s)->set_truncation(true);
  Tok(s)->clear_on_missing();
  Tok(s)->clear_special_tokens();
  auto cut = MakeTextTokenization(*FindTokenize(ResolveSpec(s, 1).value()), tok).value();
  EXPECT_EQ(cut.long_samples, TextTokenization::LongSamples::kTruncate);
  EXPECT_EQ(cut.special_tokens, tokenizer::SpecialTokens::kBosEos);
  EXPECT_FALSE(cut.skip_missing);

  const auto options = TokenizerOptionsOf([] {
    proto::TokenizeSpec t;
    t.set_bos_token_id(5);
    t.set_split_special_tokens(true);
    return t;
  }());
  EXPECT_EQ(options.bos_token_id, 5);
  EXPECT_FALSE(options.eos_token_id.has_value());
  EXPECT_TRUE(options.split_special_tokens);
}

TEST(DescribeTokenizeTest, NamesSourceAndOptionsNeverTheInlineBytes) {
  proto::TokenizeSpec t;
  t.set_tokenizer_json(std::string(5000, 'x'));
  t.set_fingerprint("sha256:abcd");
  t.set_field("text");
  t.set_special_tokens(proto::TokenizeSpec::EOS);
  t.set_on_missing(proto::TokenizeSpec::SKIP);
  const std::string d = DescribeTokenize(t);
  EXPECT_EQ(d, "inline tokenizer.json (5000 bytes) fingerprint=sha256:abcd field='text' "
               "special_tokens=eos on_missing=skip");
  t.clear_tokenizer_json();
  t.set_tokenizer_path("s3://b/tok.json");
  t.set_max_length(8);
  t.set_truncation(true);
  EXPECT_EQ(DescribeTokenize(t), "'s3://b/tok.json' fingerprint=sha256:abcd field='text' "
                                 "special_tokens=eos max_length=8 truncation on_missing=skip");
}

}  // namespace
}  // namespace zephon::pipeline

namespace zephon::pipeline {
namespace {

TEST(ResolveTokenizeTest, FieldsAndLossOnAreCheckedAndResolved) {
  proto::PipelineSpec spec = TextSpec();
  Tok(spec)->add_fields("prompt");
  Tok(spec)->add_fields("completion");
  Tok(spec)->add_loss_on("completion");
  auto r = ResolvePipeline(spec, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  const proto::TokenizeSpec& t = r->spec.operators(0).tokenize();
  EXPECT_TRUE(t.field().empty());  // `fields` replaces it; no default "text"
  EXPECT_EQ(t.fields_size(), 2);
  EXPECT_TRUE(r->lanes.loss_mask);
  EXPECT_NE(DescribeTokenize(t).find("fields=[prompt, completion]"), std::string::npos);
  EXPECT_NE(DescribeTokenize(t).find("loss_on=[completion]"), std::string::npos);

  proto::PipelineSpec one = TextSpec();  // one field in `fields`: one spelling, one hash
  Tok(one)->add_fields("body");
  auto single = ResolvePipeline(one, 2);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->spec.operators(0).tokenize().field(), "body");
  EXPECT_EQ(single->spec.operators(0).tokenize().fields_size(), 0);
  EXPECT_FALSE(single->lanes.loss_mask);

  proto::PipelineSpec bad = spec;
  Tok(bad)->add_loss_on("answer");
  ExpectError(bad, "loss_on names 'answer', which is not one of fields [prompt, completion]");
  bad = spec;
  Tok(bad)->set_field("text");
  ExpectError(bad, "both field ('text') and fields are set");
  bad = spec;
  Tok(bad)->add_fields("prompt");
  ExpectError(bad, "fields names 'prompt' twice");
  bad = TextSpec();
  Tok(bad)->add_loss_on("text");
  ExpectError(bad, "loss_on needs fields");
  bad = spec;
  Tok(bad)->set_special_tokens(proto::TokenizeSpec::TOKENIZER_DEFAULT);
  ExpectError(bad, "'tokenizer_default' cannot be split across several fields");
}

TEST(MakeTextTokenizationTest, CarriesFieldsAndLossOnFlagsInFieldOrder) {
  proto::PipelineSpec spec = TextSpec();
  Tok(spec)->add_fields("system");
  Tok(spec)->add_fields("prompt");
  Tok(spec)->add_fields("completion");
  Tok(spec)->add_loss_on("completion");
  Tok(spec)->add_loss_on("system");
  auto r = ResolvePipeline(spec, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  auto tok = tokenizer::Tokenizer::FromJson(tokenizer::kTinyLlama2Json, {});
  ASSERT_TRUE(tok.ok());
  auto text = MakeTextTokenization(r->spec.operators(0).tokenize(), *std::move(tok));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->fields, (std::vector<std::string>{"system", "prompt", "completion"}));
  EXPECT_EQ(text->loss_on, (std::vector<bool>{true, false, true}));
  EXPECT_TRUE(TextHasLossMask(*text));
}

}  // namespace
}  // namespace zephon::pipeline

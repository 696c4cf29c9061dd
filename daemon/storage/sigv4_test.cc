// SignV4 against AWS's published vectors: the "Signature Version 4 test suite"
// (aws-sig-v4-test-suite; AKIDEXAMPLE, 20150830T123600Z, us-east-1/service) and the
// worked examples of the S3 API reference, "Signature Calculations for the
// Authorization Header" (AKIAIOSFODNN7EXAMPLE, 20130524T000000Z, us-east-1/s3).
#include "daemon/storage/sigv4.h"

#include "absl/strings/match.h"
#include "common/digest.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

constexpr char kEmptySha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// --- the SigV4 test suite ----------------------------------------------------------

SigV4Credentials SuiteCredentials() {
  return {"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""};
}

SigV4Request SuiteRequest(std::string method) {
  SigV4Request r;
  r.method = std::move(method);
  r.path = "/";
  r.headers = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
  r.payload_sha256_hex = kEmptySha256;
  return r;
}

absl::StatusOr<SigV4Signature> SignSuite(const SigV4Request& r) {
  return SignV4(r, "us-east-1", "service", SuiteCredentials(), "20150830T123600Z");
}

TEST(SigV4Suite, GetVanilla) {
  auto sig = SignSuite(SuiteRequest("GET"));
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_EQ(sig->canonical_request,
            "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
            "host;x-amz-date\n" + std::string(kEmptySha256));
  EXPECT_EQ(sig->string_to_sign,
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
            "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
  EXPECT_EQ(sig->authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
            "aws4_request, SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(SigV4Suite, GetVanillaQueryOrderKeyCase) {
  SigV4Request r = SuiteRequest("GET");
  r.query = {{"Param2", "value2"}, {"Param1", "value1"}};
  auto sig = SignSuite(r);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_TRUE(absl::StrContains(sig->canonical_request, "\n/\nParam1=value1&Param2=value2\n"));
  EXPECT_EQ(sig->signature, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
}

TEST(SigV4Suite, PostVanilla) {
  auto sig = SignSuite(SuiteRequest("POST"));
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_EQ(sig->signature, "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
}

// --- the S3 API reference examples -------------------------------------------------

SigV4Credentials S3Credentials() {
  return {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
}

absl::StatusOr<SigV4Signature> SignS3(const SigV4Request& r) {
  return SignV4(r, "us-east-1", "s3", S3Credentials(), "20130524T000000Z");
}

TEST(SigV4S3Example, GetObjectWithRange) {
  SigV4Request r;
  r.method = "GET";
  r.path = "/test.txt";
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
               {"Range", "bytes=0-9"},
               {"x-amz-content-sha256", kEmptySha256},
               {"x-amz-date", "20130524T000000Z"}};
  r.payload_sha256_hex = kEmptySha256;
  auto sig = SignS3(r);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_EQ(sig->canonical_request,
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:" + std::string(kEmptySha256) +
                "\nx-amz-date:20130524T000000Z\n\n"
                "host;range;x-amz-content-sha256;x-amz-date\n" + kEmptySha256);
  EXPECT_EQ(sig->string_to_sign,
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(sig->authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4S3Example, PutObjectEncodesDollarInPath) {
  const std::string body = "Welcome to Amazon S3.";
  SigV4Request r;
  r.method = "PUT";
  r.path = "/test$file.text";
  r.payload_sha256_hex = Sha256Hex(body);
  ASSERT_EQ(r.payload_sha256_hex,
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
               {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
               {"x-amz-date", "20130524T000000Z"},
               {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
               {"x-amz-content-sha256", r.payload_sha256_hex}};
  auto sig = SignS3(r);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_TRUE(absl::StartsWith(sig->canonical_request, "PUT\n/test%24file.text\n\n"));
  EXPECT_EQ(sig->signed_headers, "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class");
  EXPECT_EQ(sig->signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(SigV4S3Example, GetBucketLifecycleValuelessQuery) {
  SigV4Request r;
  r.method = "GET";
  r.query = {{"lifecycle", ""}};
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
               {"x-amz-date", "20130524T000000Z"},
               {"x-amz-content-sha256", kEmptySha256}};
  r.payload_sha256_hex = kEmptySha256;
  auto sig = SignS3(r);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_TRUE(absl::StrContains(sig->canonical_request, "\n/\nlifecycle=\n"));
  EXPECT_EQ(sig->signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(SigV4S3Example, ListObjectsSortsQuery) {
  SigV4Request r;
  r.method = "GET";
  r.query = {{"prefix", "J"}, {"max-keys", "2"}};
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
               {"x-amz-date", "20130524T000000Z"},
               {"x-amz-content-sha256", kEmptySha256}};
  r.payload_sha256_hex = kEmptySha256;
  auto sig = SignS3(r);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_TRUE(absl::StrContains(sig->canonical_request, "\n/\nmax-keys=2&prefix=J\n"));
  EXPECT_EQ(sig->signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

// --- local behaviour ---------------------------------------------------------------

TEST(AwsUriEncode, KeepsUnreservedAndEncodesTheRest) {
  EXPECT_EQ(AwsUriEncode("AZaz09-._~", false), "AZaz09-._~");
  EXPECT_EQ(AwsUriEncode("a b/c+d=e", false), "a%20b%2Fc%2Bd%3De");
  EXPECT_EQ(AwsUriEncode("/dir/my key", true), "/dir/my%20key");
  EXPECT_EQ(AwsUriEncode("\xE1\x88\xB4", true), "%E1%88%B4");
}

TEST(ContentMd5Base64, MatchesRfc1321VectorsInBase64) {
  // MD5("") = d41d8cd98f00b204e9800998ecf8427e (RFC 1321 A.5), base64 of the raw bytes.
  EXPECT_EQ(ContentMd5Base64(""), "1B2M2Y8AsgTpgAmY7PhCfg==");
  // MD5 = 9e107d9d372bb6826bd81d3542a419d6.
  EXPECT_EQ(ContentMd5Base64("The quick brown fox jumps over the lazy dog"),
            "nhB9nTcrtoJr2B01QqQZ1g==");
  // Binary bodies hash every byte, NULs included: MD5("a\0b") =
  // 70350f6027bce3713f6b76473084309b.
  EXPECT_EQ(ContentMd5Base64(absl::string_view("a\0b", 3)), "cDUPYCe843E/a3ZHMIQwmw==");
}

TEST(SigV4, EncodesSlashInQueryValuesButNotInThePath) {
  SigV4Request r = SuiteRequest("GET");
  r.path = "/a b/c";
  r.query = {{"prefix", "x/y"}};
  auto sig = SignSuite(r);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_TRUE(absl::StartsWith(sig->canonical_request, "GET\n/a%20b/c\nprefix=x%2Fy\n"));
}

TEST(SigV4, AddsDateAndSessionTokenHeadersAndNormalizesValues) {
  SigV4Request r;
  r.method = "GET";
  r.headers = {{"Host", "  example.amazonaws.com "}, {"X-Multi", "a   b"}};
  r.payload_sha256_hex = "UNSIGNED-PAYLOAD";
  SigV4Credentials creds = SuiteCredentials();
  creds.session_token = "TOKEN";
  auto sig = SignV4(r, "us-east-1", "s3", creds, "20150830T123600Z");
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_EQ(sig->signed_headers, "host;x-amz-date;x-amz-security-token;x-multi");
  EXPECT_TRUE(absl::StrContains(
      sig->canonical_request,
      "host:example.amazonaws.com\nx-amz-date:20150830T123600Z\n"
      "x-amz-security-token:TOKEN\nx-multi:a b\n"));
  const HeaderList expected = {{"host", "example.amazonaws.com"},
                               {"x-amz-date", "20150830T123600Z"},
                               {"x-amz-security-token", "TOKEN"},
                               {"x-multi", "a b"}};
  EXPECT_EQ(sig->headers, expected);
}

TEST(SigV4, RejectsBadInput) {
  SigV4Request r = SuiteRequest("GET");
  EXPECT_EQ(SignV4(r, "us-east-1", "service", SuiteCredentials(), "2015-08-30").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SignV4(r, "us-east-1", "service", SuiteCredentials(), "20150830T123601Z")
                .status().code(),
            absl::StatusCode::kInvalidArgument);  // x-amz-date disagrees
  SigV4Request no_host = r;
  no_host.headers = {};
  EXPECT_EQ(SignSuite(no_host).status().code(), absl::StatusCode::kInvalidArgument);
  SigV4Request bad_path = r;
  bad_path.path = "x";
  EXPECT_EQ(SignSuite(bad_path).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zephon::storage

// How S3Store reads an S3 answer: status mapping, the 206 Content-Range and ETag checks,
// transport-error wording. No server needed; tests/s3 covers the same against s3rver.
#include "daemon/storage/s3_response.h"

#include <curl/curl.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "daemon/storage/object_store.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

S3RequestContext Ctx(const std::string& op = "GET") {
  return S3RequestContext{op, "s3://bkt/pre/k", "bkt", "http://127.0.0.1:4568"};
}

S3Response Answer(long status, const std::string& s3_code = "", int attempts = 1) {
  S3Response r;
  r.status = status;
  if (!s3_code.empty()) {
    r.body = "<?xml version=\"1.0\"?><Error><Code>" + s3_code +
             "</Code><Message>it says so</Message></Error>";
  }
  r.attempts = attempts;
  return r;
}

S3Response Partial(const std::string& body, const std::string& content_range) {
  S3Response r;
  r.status = 206;
  r.body = body;
  if (!content_range.empty()) r.headers.emplace_back("content-range", content_range);
  return r;
}

TEST(S3HeaderValue, FirstMatchOrEmpty) {
  const HeaderList h = {{"etag", "\"a\""}, {"x", "1"}, {"x", "2"}};
  EXPECT_EQ(S3HeaderValue(h, "x"), "1");
  EXPECT_EQ(S3HeaderValue(h, "etag"), "\"a\"");
  EXPECT_EQ(S3HeaderValue(h, "missing"), "");
}

TEST(S3HttpError, MapsStatusAndS3CodeToAbslCodes) {
  using C = absl::StatusCode;
  EXPECT_EQ(S3HttpError(Ctx(), Answer(404, "NoSuchKey")).code(), C::kNotFound);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(404, "NoSuchBucket")).code(), C::kFailedPrecondition);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(404)).code(), C::kNotFound);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(401)).code(), C::kUnauthenticated);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(403, "AccessDenied")).code(), C::kPermissionDenied);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(416, "InvalidRange")).code(), C::kOutOfRange);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(501, "NotImplemented")).code(), C::kUnimplemented);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(400, "BadDigest")).code(), C::kDataLoss);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(400, "XAmzContentSHA256Mismatch")).code(),
            C::kDataLoss);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(400, "RequestTimeout")).code(), C::kUnavailable);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(500, "InternalError")).code(), C::kUnavailable);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(503, "SlowDown")).code(), C::kUnavailable);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(429)).code(), C::kUnavailable);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(400, "InvalidArgument")).code(), C::kInvalidArgument);
  EXPECT_EQ(S3HttpError(Ctx(), Answer(409, "BucketNotEmpty")).code(), C::kFailedPrecondition);
}

TEST(S3HttpError, MessageNamesRequestStatusS3ErrorAndAttempts) {
  const absl::Status s = S3HttpError(Ctx("PUT"), Answer(503, "SlowDown", 4));
  EXPECT_EQ(s.message(),
            "S3 PUT s3://bkt/pre/k (bucket 'bkt', endpoint http://127.0.0.1:4568): HTTP 503 "
            "SlowDown: it says so (after 4 attempts)");
  const absl::Status missing = S3HttpError(Ctx(), Answer(404, "NoSuchBucket"));
  EXPECT_TRUE(absl::StrContains(missing.message(), "[bucket 'bkt' does not exist]")) << missing;
  const absl::Status unimplemented = S3HttpError(Ctx("DELETE"), Answer(501, "NotImplemented"));
  EXPECT_TRUE(absl::StrContains(unimplemented.message(),
                                "does not implement S3 DELETE as sent here; not retried"))
      << unimplemented;
  S3Response html = Answer(502);
  html.body = std::string(300, 'x');  // not an error document: its start is quoted
  const absl::Status bad_gateway = S3HttpError(Ctx(), html);
  EXPECT_TRUE(absl::StrContains(bad_gateway.message(), "HTTP 502 " + std::string(200, 'x')))
      << bad_gateway;
  EXPECT_FALSE(absl::StrContains(bad_gateway.message(), std::string(201, 'x')));
  EXPECT_FALSE(absl::StrContains(bad_gateway.message(), "attempts"));
}

TEST(S3CheckVersion, PreconditionFailedOrAnotherETagIsAVersionMismatch) {
  S3Response ok = Answer(200);
  ok.headers.emplace_back("etag", "\"v1\"");
  EXPECT_TRUE(S3CheckVersion(Ctx(), ok, "").ok());
  EXPECT_TRUE(S3CheckVersion(Ctx(), ok, "v1").ok());
  EXPECT_TRUE(S3CheckVersion(Ctx(), ok, "\"v1\"").ok());  // quotes tolerated

  const absl::Status ignored = S3CheckVersion(Ctx(), ok, "v0");  // If-Match ignored
  EXPECT_TRUE(IsVersionMismatch(ignored)) << ignored;
  EXPECT_EQ(VersionMismatchFound(ignored), "v1");
  EXPECT_TRUE(absl::StrContains(ignored.message(), "the server ignored If-Match")) << ignored;

  const absl::Status changed = S3CheckVersion(Ctx(), Answer(412, "PreconditionFailed"), "v0");
  EXPECT_TRUE(IsVersionMismatch(changed)) << changed;
  EXPECT_EQ(VersionMismatchFound(changed), "");
  EXPECT_TRUE(absl::StrContains(changed.message(), "s3://bkt/pre/k")) << changed;
  EXPECT_TRUE(absl::StrContains(changed.message(), "HTTP 412")) << changed;
  EXPECT_TRUE(S3CheckVersion(Ctx(), Answer(412, "PreconditionFailed"), "").ok());

  S3Response no_etag = Answer(206);
  EXPECT_TRUE(S3CheckVersion(Ctx(), no_etag, "v0").ok());  // nothing to compare
  S3Response not_found = Answer(404, "NoSuchKey");
  not_found.headers.emplace_back("etag", "\"v1\"");
  EXPECT_TRUE(S3CheckVersion(Ctx(), not_found, "v0").ok());  // left to S3HttpError
}

TEST(S3CheckPartialContent, AcceptsTheRangeAskedForOrItsTailAtTheObjectsEnd) {
  EXPECT_TRUE(S3CheckPartialContent(Ctx(), Partial("abcd", "bytes 10-13/100"), 10, 4).ok());
  EXPECT_TRUE(S3CheckPartialContent(Ctx(), Partial("ab", "bytes 98-99/100"), 98, 4).ok());
  EXPECT_TRUE(S3CheckPartialContent(Ctx(), Partial("abcd", "bytes 10-13/*"), 10, 4).ok());
  EXPECT_TRUE(S3CheckPartialContent(Ctx(), Partial("ab", "bytes 10-11/*"), 10, 4).ok());
  // No Content-Range (some proxies): a non-empty body no longer than asked for.
  EXPECT_TRUE(S3CheckPartialContent(Ctx(), Partial("abcd", ""), 10, 4).ok());
  EXPECT_TRUE(S3CheckPartialContent(Ctx(), Partial("ab", ""), 10, 4).ok());
  // A length that runs past 2^64 is clamped, not wrapped.
  EXPECT_TRUE(
      S3CheckPartialContent(Ctx(), Partial("ab", "bytes 5-6/7"), 5, UINT64_MAX).ok());
}

TEST(S3CheckPartialContent, AnythingElseIsDataLossNamingBothRanges) {
  struct Case {
    std::string body, content_range, problem;
  };
  const Case cases[] = {
      {"", "", "no Content-Range, and a body of that length"},
      {"abcde", "", "no Content-Range, and a body of that length"},
      {"abcd", "bytes=10-13/100", "a malformed Content-Range"},
      {"abcd", "bytes 13-10/100", "a malformed Content-Range"},
      {"abcd", "bytes 10-13/13", "a malformed Content-Range"},
      {"abcd", "bytes 10-13/x", "a malformed Content-Range"},
      {"abcd", "bytes 11-14/100", "a range that starts elsewhere"},
      {"abc", "bytes 10-13/100", "a body whose length disagrees with its Content-Range"},
      {"abcde", "bytes 10-14/100", "more bytes than were asked for"},
      {"ab", "bytes 10-11/100", "fewer bytes than asked for, yet not up to the object's end"},
  };
  for (const Case& c : cases) {
    const absl::Status s = S3CheckPartialContent(Ctx(), Partial(c.body, c.content_range), 10, 4);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << c.content_range << " " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), c.problem)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "S3 GET s3://bkt/pre/k (bucket 'bkt'")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "asked for bytes 10-13")) << s;
    EXPECT_TRUE(absl::StrContains(
        s.message(), "Content-Range '" +
                         (c.content_range.empty() ? std::string("(none)") : c.content_range) +
                         "' and " + std::to_string(c.body.size()) + " body bytes"))
        << s;
  }
}

TEST(S3TransportError, SaysWhatHappenedThenCurlsOwnDetail) {
  const absl::Status cut =
      S3TransportError(Ctx(), CURLE_PARTIAL_FILE,
                       "transfer closed with 99000 bytes remaining to read", 0, 0);
  EXPECT_EQ(cut.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(cut.message(),
            "GET s3://bkt/pre/k via http://127.0.0.1:4568: the server closed the connection "
            "before the whole body arrived (curl 18: transfer closed with 99000 bytes "
            "remaining to read)");
  // No hint for this code, and no error buffer: curl_easy_strerror's text alone.
  const absl::Status other = S3TransportError(Ctx(), CURLE_WRITE_ERROR, "", 0, 0);
  EXPECT_EQ(other.message(),
            std::string("GET s3://bkt/pre/k via http://127.0.0.1:4568: curl 23: ") +
                curl_easy_strerror(CURLE_WRITE_ERROR));
}

TEST(S3TransportError, TimeoutsAndPermanentFailuresGetTheirOwnCodes) {
  using C = absl::StatusCode;
  EXPECT_EQ(S3TransportError(Ctx(), CURLE_OPERATION_TIMEDOUT, "", 0, 0).code(),
            C::kDeadlineExceeded);
  EXPECT_EQ(S3TransportError(Ctx(), CURLE_COULDNT_CONNECT, "", 0, 0).code(), C::kUnavailable);
  EXPECT_EQ(S3TransportError(Ctx(), CURLE_RECV_ERROR, "", 0, 0).code(), C::kUnavailable);
  EXPECT_EQ(S3TransportError(Ctx(), CURLE_URL_MALFORMAT, "", 0, 0).code(),
            C::kInvalidArgument);
  EXPECT_EQ(S3TransportError(Ctx(), CURLE_PEER_FAILED_VERIFICATION, "", 0, 0).code(),
            C::kInvalidArgument);
  EXPECT_EQ(S3TransportError(Ctx(), CURLE_OUT_OF_MEMORY, "", 0, 0).code(),
            C::kInvalidArgument);
}

TEST(S3TransportError, APutSaysHowMuchOfTheBodyWasSent) {
  const absl::Status part = S3TransportError(Ctx("PUT"), CURLE_SEND_ERROR, "reset", 10, 100);
  EXPECT_TRUE(absl::EndsWith(
      part.message(), "; 10 of 100 body bytes sent (S3 never stores an incomplete PUT)"))
      << part;
  const absl::Status all = S3TransportError(Ctx("PUT"), CURLE_RECV_ERROR, "reset", 100, 100);
  EXPECT_TRUE(absl::EndsWith(
      all.message(),
      "; 100 of 100 body bytes sent (the server may or may not have stored the object)"))
      << all;
  const absl::Status get = S3TransportError(Ctx("GET"), CURLE_RECV_ERROR, "reset", 0, 0);
  EXPECT_FALSE(absl::StrContains(get.message(), "body bytes sent")) << get;
}

}  // namespace
}  // namespace zephon::storage

#include "daemon/storage/s3_response.h"

#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "daemon/storage/object_store.h"
#include "daemon/storage/s3_retry.h"
#include "daemon/storage/s3_xml.h"

namespace zephon::storage {
namespace {

// "bytes FIRST-LAST/TOTAL" (TOTAL may be "*": unknown).
struct ContentRange {
  uint64_t first = 0;
  uint64_t last = 0;
  std::optional<uint64_t> total;
};

std::optional<ContentRange> ParseContentRange(absl::string_view v) {
  if (!absl::ConsumePrefix(&v, "bytes ")) return std::nullopt;
  const size_t dash = v.find('-');
  const size_t slash = v.find('/');
  if (dash == absl::string_view::npos || slash == absl::string_view::npos || slash < dash) {
    return std::nullopt;
  }
  ContentRange r;
  if (!absl::SimpleAtoi(v.substr(0, dash), &r.first) ||
      !absl::SimpleAtoi(v.substr(dash + 1, slash - dash - 1), &r.last) || r.last < r.first) {
    return std::nullopt;
  }
  const absl::string_view total = v.substr(slash + 1);
  if (total != "*") {
    uint64_t t = 0;
    if (!absl::SimpleAtoi(total, &t) || r.last >= t) return std::nullopt;
    r.total = t;
  }
  return r;
}

// What a transport failure means for the caller, in words; "" when curl's text says it.
absl::string_view TransportHint(CURLcode code) {
  switch (code) {
    case CURLE_PARTIAL_FILE:
      return "the server closed the connection before the whole body arrived";
    case CURLE_GOT_NOTHING:
      return "the server closed the connection without answering";
    case CURLE_SEND_ERROR:
      return "the connection broke while sending the request";
    case CURLE_RECV_ERROR:
      return "the connection broke while receiving the response";
    case CURLE_COULDNT_CONNECT:
      return "nothing accepts connections at the endpoint (is the server up?)";
    case CURLE_COULDNT_RESOLVE_HOST:
      return "the endpoint's host name does not resolve";
    case CURLE_OPERATION_TIMEDOUT:
      return "no complete answer within the timeout";
    default:
      return "";
  }
}

// Transport errors that cannot get better by retrying.
bool Permanent(CURLcode code) {
  return code == CURLE_UNSUPPORTED_PROTOCOL || code == CURLE_URL_MALFORMAT ||
         code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CERTPROBLEM ||
         code == CURLE_SSL_CACERT_BADFILE || code == CURLE_OUT_OF_MEMORY;
}

// An ETag or version without its surrounding double quotes.
std::string Unquoted(absl::string_view etag) {
  return std::string(absl::StripSuffix(absl::StripPrefix(etag, "\""), "\""));
}

}  // namespace

std::string S3HeaderValue(const HeaderList& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

absl::Status S3HttpError(const S3RequestContext& req, const S3Response& resp) {
  std::string detail = ParseS3Error(resp.body);
  const std::string s3_code = XmlElementText(resp.body, "Code", nullptr);
  if (detail.empty()) detail = resp.body.substr(0, 200);
  std::string msg = absl::StrCat("S3 ", req.op, " ", req.object, " (bucket '", req.bucket,
                                 "', endpoint ", req.endpoint, "): HTTP ", resp.status);
  if (!detail.empty()) absl::StrAppend(&msg, " ", detail);
  if (resp.attempts > 1) absl::StrAppend(&msg, " (after ", resp.attempts, " attempts)");
  const long s = resp.status;
  if (s == 404 && s3_code == "NoSuchBucket") {
    return absl::FailedPreconditionError(
        absl::StrCat(msg, " [bucket '", req.bucket, "' does not exist]"));
  }
  if (s == 404) return absl::NotFoundError(msg);
  if (s == 501) {
    return absl::UnimplementedError(absl::StrCat(
        msg, " [the server at ", req.endpoint, " does not implement S3 ", req.op,
        " as sent here; not retried]"));
  }
  if (s == 401) return absl::UnauthenticatedError(msg);
  if (s == 403) return absl::PermissionDeniedError(msg);
  if (s == 416) return absl::OutOfRangeError(msg);
  if (IsS3DigestMismatch(s, s3_code)) {
    return absl::DataLossError(absl::StrCat(
        msg, " [the body S3 received does not match the Content-MD5 / SHA-256 the client "
        "sent: corrupted in transit; S3 stored nothing]"));
  }
  if (s >= 500 || s == 429 || IsS3RequestTimeout(s, s3_code)) {
    return absl::UnavailableError(msg);
  }
  if (s == 400) return absl::InvalidArgumentError(msg);
  return absl::FailedPreconditionError(msg);
}

absl::Status S3CheckVersion(const S3RequestContext& req, const S3Response& resp,
                            const std::string& if_version) {
  if (if_version.empty()) return absl::OkStatus();
  const std::string expected = Unquoted(if_version);
  if (resp.status == 412) {  // S3 evaluated If-Match: the object has another ETag now
    return VersionMismatchError(req.object, expected, "", S3HttpError(req, resp).message());
  }
  // A server that ignores If-Match (s3rver 3.7 does) still sends the ETag of the bytes
  // it returned; a different one means those bytes belong to another version.
  const std::string found = Unquoted(S3HeaderValue(resp.headers, "etag"));
  if ((resp.status == 200 || resp.status == 206) && !found.empty() && found != expected) {
    return VersionMismatchError(
        req.object, expected, found,
        absl::StrCat("S3 ", req.op, " via ", req.endpoint, ": the server ignored If-Match"));
  }
  return absl::OkStatus();
}

absl::Status S3CheckPartialContent(const S3RequestContext& req, const S3Response& resp,
                                   uint64_t offset, uint64_t length) {
  const uint64_t size = resp.body.size();
  const std::string content_range = S3HeaderValue(resp.headers, "content-range");
  std::string problem;
  if (content_range.empty()) {
    if (size == 0 || size > length) problem = "no Content-Range, and a body of that length";
  } else if (const std::optional<ContentRange> r = ParseContentRange(content_range);
             !r.has_value()) {
    problem = "a malformed Content-Range";
  } else if (r->first != offset) {
    problem = "a range that starts elsewhere";
  } else if (r->last - r->first + 1 != size) {
    problem = "a body whose length disagrees with its Content-Range";
  } else if (size > length) {
    problem = "more bytes than were asked for";
  } else if (size < length && r->total.has_value() && r->last + 1 != *r->total) {
    problem = "fewer bytes than asked for, yet not up to the object's end";
  }
  if (problem.empty()) return absl::OkStatus();
  const uint64_t last = length - 1 > UINT64_MAX - offset ? UINT64_MAX : offset + length - 1;
  return absl::DataLossError(absl::StrCat(
      "S3 GET ", req.object, " (bucket '", req.bucket, "', endpoint ", req.endpoint,
      "): asked for bytes ", offset, "-", last, ", the server answered 206 with "
      "Content-Range '", content_range.empty() ? "(none)" : content_range, "' and ", size,
      " body bytes: ", problem, "; the bytes are not used"));
}

absl::Status S3TransportError(const S3RequestContext& req, CURLcode code,
                              std::string_view curl_error, int64_t body_sent,
                              uint64_t body_size) {
  // e.g. "GET s3://b/k via http://h:1: the server closed the connection before the
  // whole body arrived (curl 18: transfer closed with 99000 bytes remaining to read)".
  std::string what = absl::StrCat(req.op, " ", req.object, " via ", req.endpoint, ": ");
  const absl::string_view hint = TransportHint(code);
  const absl::string_view detail = !curl_error.empty()
                                       ? absl::string_view(curl_error.data(), curl_error.size())
                                       : absl::string_view(curl_easy_strerror(code));
  if (!hint.empty()) absl::StrAppend(&what, hint, " (");
  absl::StrAppend(&what, "curl ", static_cast<int>(code), ": ", detail);
  if (!hint.empty()) absl::StrAppend(&what, ")");
  if (req.op == "PUT") {
    absl::StrAppend(&what, "; ", body_sent, " of ", body_size, " body bytes sent",
                    static_cast<uint64_t>(body_sent) < body_size
                        ? " (S3 never stores an incomplete PUT)"
                        : " (the server may or may not have stored the object)");
  }
  if (code == CURLE_OPERATION_TIMEDOUT) return absl::DeadlineExceededError(what);
  if (Permanent(code)) return absl::InvalidArgumentError(what);
  return absl::UnavailableError(what);
}

}  // namespace zephon::storage

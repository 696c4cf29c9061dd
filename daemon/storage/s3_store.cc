#include "daemon/storage/s3_store.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/digest.h"
#include "common/status_macros.h"
#include "daemon/storage/aws_config.h"
#include "daemon/storage/s3_response.h"
#include "daemon/storage/s3_retry.h"
#include "daemon/storage/s3_xml.h"

namespace zephon::storage {

struct S3Store::Request {
  std::string op;        // "GET", "PUT", "HEAD", "DELETE" (the HTTP method)
  std::string full_key;  // bucket key ("" for bucket-level requests such as List)
  HeaderList query;      // unencoded
  HeaderList headers;    // extra headers to sign and send (e.g. range)
  std::string_view body;
};

namespace {

std::string GetEnv(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

size_t WriteBody(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

size_t WriteHeader(char* data, size_t size, size_t n, void* user) {
  absl::string_view line(data, size * n);
  const size_t colon = line.find(':');
  if (colon != absl::string_view::npos) {
    static_cast<HeaderList*>(user)->emplace_back(
        absl::AsciiStrToLower(line.substr(0, colon)),
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  }
  return size * n;
}

struct UploadCursor {
  std::string_view data;
  size_t pos = 0;
};

size_t ReadBody(char* buf, size_t size, size_t n, void* user) {
  auto* cur = static_cast<UploadCursor*>(user);
  const size_t take = std::min(size * n, cur->data.size() - cur->pos);
  std::copy_n(cur->data.data() + cur->pos, take, buf);
  cur->pos += take;
  return take;
}

// An ObjectInfo::version (the ETag without quotes) as S3 compares it in If-Match: in
// double quotes. Tolerates a version that still has its quotes.
std::string QuotedEtag(absl::string_view version) {
  return absl::StrCat("\"", absl::StripSuffix(absl::StripPrefix(version, "\""), "\""),
                      "\"");
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

}  // namespace

absl::StatusOr<std::unique_ptr<S3Store>> S3Store::Open(S3Options o) {
  static std::once_flag curl_once;
  std::call_once(curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });

  RETURN_IF_ERROR(ParseS3Url(absl::StrCat("s3://", o.bucket)).status());
  while (!o.prefix.empty() && o.prefix.back() == '/') o.prefix.pop_back();
  if (!o.prefix.empty()) RETURN_IF_ERROR(ValidateKey(o.prefix));
  if (o.region.empty()) o.region = GetEnv("AWS_REGION");
  if (o.region.empty()) o.region = GetEnv("AWS_DEFAULT_REGION");
  // The environment and the shared files are consulted only for what is still unset, or
  // when AWS_PROFILE asks for a profile (which must then exist); LoadAwsSharedConfig
  // reads only the files that can matter (aws_config.h).
  std::string credentials_hint = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY";
  if (o.credentials.access_key.empty() || o.region.empty() || !GetEnv("AWS_PROFILE").empty()) {
    AwsSharedConfigNeeds needs;
    needs.credentials = o.credentials.access_key.empty();
    needs.region = o.region.empty();
    absl::StatusOr<AwsSharedConfig> shared = LoadAwsSharedConfig(needs);
    if (!shared.ok()) {
      return absl::Status(shared.status().code(),
                          absl::StrCat("AWS configuration for s3://", o.bucket, ": ",
                                       shared.status().message()));
    }
    if (o.credentials.access_key.empty()) o.credentials = shared->credentials;
    if (o.region.empty()) o.region = shared->region;
    absl::StrAppend(&credentials_hint, ", or aws_access_key_id and aws_secret_access_key in "
                    "profile '", shared->profile, "' of ",
                    shared->credentials_file.empty() ? "~/.aws/credentials"
                                                     : shared->credentials_file);
  }
  if (o.region.empty()) o.region = "us-east-1";
  if (o.endpoint.empty()) o.endpoint = GetEnv("AWS_ENDPOINT_URL");
  const bool custom_endpoint = !o.endpoint.empty();
  if (!custom_endpoint) o.endpoint = absl::StrCat("https://s3.", o.region, ".amazonaws.com");

  std::string scheme;
  absl::string_view rest = o.endpoint;
  if (absl::ConsumePrefix(&rest, "http://")) {
    scheme = "http";
  } else if (absl::ConsumePrefix(&rest, "https://")) {
    scheme = "https";
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "S3 endpoint '", o.endpoint, "' must start with http:// or https://"));
  }
  absl::ConsumeSuffix(&rest, "/");
  if (!o.path_style.has_value()) {
    // Virtual-host style puts the bucket into the TLS host name, and AWS's wildcard
    // certificate (*.s3.<region>.amazonaws.com) covers one label only: a bucket with a
    // '.' would fail peer verification, so it goes path-style, as the AWS SDKs do.
    o.path_style = custom_endpoint || (scheme == "https" && absl::StrContains(o.bucket, '.'));
  }
  if (rest.empty() || rest.find_first_of("/?#@ ") != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "S3 endpoint '", o.endpoint, "' must be scheme://host[:port] (no path)"));
  }
  if (o.max_attempts < 1 || o.list_page_size < 1 || o.list_page_size > 1000 ||
      o.connect_timeout <= absl::ZeroDuration() ||
      o.request_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "S3Options: max_attempts >= 1, list_page_size in 1..1000 and positive timeouts "
        "are required");
  }
  if (o.credentials.access_key.empty() || o.credentials.secret_key.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no AWS credentials for s3://", o.bucket, ": ", credentials_hint));
  }
  std::string host(rest);
  return std::unique_ptr<S3Store>(new S3Store(std::move(o), std::move(scheme), std::move(host)));
}

absl::StatusOr<std::unique_ptr<S3Store>> S3Store::OpenUrl(const std::string& url,
                                                          const S3Options& defaults,
                                                          absl::Duration call_budget) {
  ASSIGN_OR_RETURN(S3Location loc, ParseS3Url(url));
  S3Options options = defaults;
  options.credentials = {};
  options.bucket = std::move(loc.bucket);
  options.prefix = std::move(loc.key);
  if (call_budget != absl::InfiniteDuration()) {
    const absl::Duration per_attempt =
        std::max(absl::Seconds(1), call_budget / std::max(1, options.max_attempts));
    options.request_timeout = std::min(options.request_timeout, per_attempt);
    options.connect_timeout = std::min(options.connect_timeout, options.request_timeout);
  }
  return Open(std::move(options));
}

std::string S3Store::FullKey(const std::string& key) const {
  return options_.prefix.empty() ? key : absl::StrCat(options_.prefix, "/", key);
}

std::string S3Store::Describe(const std::string& full_key) const {
  return absl::StrCat("s3://", options_.bucket, "/", full_key);
}

absl::StatusOr<S3Store::Response> S3Store::SendOnce(const Request& req) const {
  const bool path_style = *options_.path_style;
  const std::string host = path_style ? host_ : absl::StrCat(options_.bucket, ".", host_);
  std::string path = path_style ? absl::StrCat("/", options_.bucket) : "";
  if (!req.full_key.empty() || !path_style) absl::StrAppend(&path, "/", req.full_key);

  std::string url = absl::StrCat(scheme_, "://", host, AwsUriEncode(path, true));
  if (const std::string query = CanonicalQuery(req.query); !query.empty()) {
    absl::StrAppend(&url, "?", query);
  }

  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
  CURL* c = curl.get();
  const absl::string_view body(req.body.data(), req.body.size());
  HeaderList signed_headers = req.headers;
  if (req.op == "PUT") signed_headers.emplace_back("content-md5", ContentMd5Base64(body));
  SignWithCurl(c, options_.region, options_.credentials, Sha256Hex(body), &signed_headers);
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  for (const auto& [k, v] : signed_headers) {
    headers.reset(curl_slist_append(headers.release(), absl::StrCat(k, ": ", v).c_str()));
  }

  Response resp;
  UploadCursor upload{req.body, 0};
  char curl_error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_error);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(options_.connect_timeout)));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(options_.request_timeout)));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &WriteBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &WriteHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &resp.headers);
  if (req.op == "PUT") {
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, &ReadBody);
    curl_easy_setopt(c, CURLOPT_READDATA, &upload);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    // curl sends "Expect: 100-continue" (removing it with "Expect:" would sign a header
    // that is not sent, sigv4.h); do not wait for the 100 before the body.
    curl_easy_setopt(c, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
  } else if (req.op == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (req.op != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.op.c_str());
  }
  const CURLcode code = curl_easy_perform(c);
  if (code != CURLE_OK) {
    curl_off_t sent = 0;
    if (req.op == "PUT") curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &sent);
    return S3TransportError(Context(req), code, curl_error, sent, req.body.size());
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.status);
  return resp;
}

absl::StatusOr<S3Store::Response> S3Store::Send(const Request& req) const {
  int attempts = 0;
  absl::StatusOr<Response> out = SendWithRetries(req, &attempts);
  if (options_.counters != nullptr) {
    // A 404 is an answer (no such object), not a fault of the store.
    const bool error = !out.ok() || (out->status >= 400 && out->status != 404);
    options_.counters->Count(req.op == "GET" && req.full_key.empty() ? "LIST" : req.op,
                             attempts, error);
  }
  return out;
}

absl::StatusOr<S3Store::Response> S3Store::SendWithRetries(const Request& req,
                                                           int* attempts) const {
  for (int attempt = 1;; ++attempt) {
    *attempts = attempt;
    absl::StatusOr<Response> resp = SendOnce(req);
    const bool retry =
        resp.ok() ? IsS3RetryableHttp(resp->status,
                                      resp->status == 400
                                          ? XmlElementText(resp->body, "Code", nullptr)
                                          : std::string())
                  : IsS3RetryableTransport(resp.status());
    if (!retry || attempt >= options_.max_attempts) {
      if (resp.ok()) {
        resp->attempts = attempt;
        return resp;
      }
      if (attempt == 1 || !retry) return resp.status();
      return absl::Status(resp.status().code(),
                          absl::StrCat(resp.status().message(), " (after ", attempt,
                                       " attempts)"));
    }
    const std::optional<absl::Duration> retry_after =
        resp.ok() ? S3RetryAfter(resp->status, S3HeaderValue(resp->headers, "retry-after"))
                  : std::nullopt;
    absl::SleepFor(
        S3RetryDelay(attempt, options_.initial_backoff, retry_after, S3RetryJitter()));
  }
}

S3RequestContext S3Store::Context(const Request& req) const {
  return S3RequestContext{req.op, Describe(req.full_key), options_.bucket, options_.endpoint};
}

absl::Status S3Store::HttpError(const Request& req, const Response& resp) const {
  return S3HttpError(Context(req), resp);
}

absl::StatusOr<std::string> S3Store::Get(const std::string& key,
                                         const std::string& if_version) {
  RETURN_IF_ERROR(ValidateKey(key));
  Request req{"GET", FullKey(key), {}, {}, {}};
  if (!if_version.empty()) req.headers.emplace_back("if-match", QuotedEtag(if_version));
  ASSIGN_OR_RETURN(Response resp, Send(req));
  RETURN_IF_ERROR(S3CheckVersion(Context(req), resp, if_version));
  if (resp.status != 200) return HttpError(req, resp);
  return std::move(resp.body);
}

absl::StatusOr<std::string> S3Store::GetRange(const std::string& key, uint64_t offset,
                                              uint64_t length, const std::string& if_version) {
  RETURN_IF_ERROR(ValidateKey(key));
  // No bytes to fetch (length 0) or none at `offset` (416): the answer is "" or
  // OUT_OF_RANGE, from the object's size, after the version check.
  auto empty_or_out_of_range = [&]() -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(ObjectInfo info, Head(key));
    const std::string expected(absl::StripSuffix(absl::StripPrefix(if_version, "\""), "\""));
    if (!expected.empty() && info.version != expected) {
      return VersionMismatchError(Describe(FullKey(key)), expected, info.version);
    }
    if (offset > info.size) {
      return absl::OutOfRangeError(absl::StrCat("range offset ", offset, " is past the end of ",
                                                Describe(FullKey(key)), " (", info.size,
                                                " bytes)"));
    }
    return std::string();
  };
  if (length == 0) return empty_or_out_of_range();
  const uint64_t last = length - 1 > UINT64_MAX - offset ? UINT64_MAX : offset + length - 1;
  Request req{
      "GET", FullKey(key), {}, {{"range", absl::StrCat("bytes=", offset, "-", last)}}, {}};
  if (!if_version.empty()) req.headers.emplace_back("if-match", QuotedEtag(if_version));
  ASSIGN_OR_RETURN(Response resp, Send(req));
  RETURN_IF_ERROR(S3CheckVersion(Context(req), resp, if_version));
  if (resp.status == 206) {
    RETURN_IF_ERROR(S3CheckPartialContent(Context(req), resp, offset, length));
    return std::move(resp.body);
  }
  if (resp.status == 416) return empty_or_out_of_range();
  if (resp.status == 200) {  // the server ignored Range: cut locally
    if (offset > resp.body.size()) return empty_or_out_of_range();
    return resp.body.substr(offset, length);
  }
  return HttpError(req, resp);
}

absl::Status S3Store::BucketMissingAfter404(const Request& req) const {
  const Request bucket_req{"HEAD", "", {}, {}, {}};  // HeadBucket
  absl::StatusOr<Response> resp = Send(bucket_req);
  if (!resp.ok()) {
    return absl::Status(resp.status().code(),
                        absl::StrCat("S3 ", req.op, " ", Describe(req.full_key),
                                     " answered HTTP 404; checking that bucket '",
                                     options_.bucket, "' exists (HeadBucket) failed: ",
                                     resp.status().message()));
  }
  if (resp->status != 404) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "S3 ", req.op, " ", Describe(req.full_key), " (bucket '", options_.bucket,
      "', endpoint ", options_.endpoint, "): HTTP 404, and HeadBucket HTTP 404: bucket '",
      options_.bucket, "' does not exist (NoSuchBucket)"));
}

absl::Status S3Store::Put(const std::string& key, std::string_view bytes) {
  RETURN_IF_ERROR(ValidateKey(key));
  const Request req{"PUT", FullKey(key), {}, {}, bytes};
  ASSIGN_OR_RETURN(Response resp, Send(req));
  if (resp.status != 200) return HttpError(req, resp);
  return absl::OkStatus();
}

absl::Status S3Store::Delete(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  const Request req{"DELETE", FullKey(key), {}, {}, {}};
  ASSIGN_OR_RETURN(Response resp, Send(req));
  if (resp.status == 200 || resp.status == 204) return absl::OkStatus();
  if (resp.status == 404 && XmlElementText(resp.body, "Code", nullptr) == "NoSuchKey") {
    return absl::OkStatus();  // idempotent
  }
  return HttpError(req, resp);
}

absl::StatusOr<ObjectInfo> S3Store::Head(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  const Request req{"HEAD", FullKey(key), {}, {}, {}};
  ASSIGN_OR_RETURN(Response resp, Send(req));
  if (resp.status == 404 && resp.body.empty()) {
    // A HEAD answer has no error document to say NoSuchKey or NoSuchBucket.
    RETURN_IF_ERROR(BucketMissingAfter404(req));
  }
  if (resp.status != 200) return HttpError(req, resp);
  ObjectInfo info;
  info.key = key;
  const std::string length = S3HeaderValue(resp.headers, "content-length");
  if (!absl::SimpleAtoi(length, &info.size)) {
    return absl::InternalError(absl::StrCat("S3 HEAD ", Describe(req.full_key),
                                            ": bad Content-Length '", length, "'"));
  }
  const std::string modified = S3HeaderValue(resp.headers, "last-modified");
  const time_t t = curl_getdate(modified.c_str(), nullptr);
  info.mtime = t == -1 ? absl::InfinitePast() : absl::FromTimeT(t);
  info.version = std::string(absl::StripSuffix(
      absl::StripPrefix(S3HeaderValue(resp.headers, "etag"), "\""), "\""));
  return info;
}

absl::StatusOr<DirectoryListing> S3Store::ListPaged(const std::string& prefix,
                                                    bool delimited) const {
  const std::string root = options_.prefix.empty() ? "" : options_.prefix + "/";
  const std::string full_prefix = root + prefix;
  const std::string what =
      absl::StrCat("listing prefix '", full_prefix, "'", delimited ? " with delimiter '/'" : "");
  DirectoryListing out;
  std::string token;
  for (;;) {
    Request req{"GET", "", {{"list-type", "2"},
                             {"max-keys", absl::StrCat(options_.list_page_size)}},
                {}, {}};
    if (!full_prefix.empty()) req.query.emplace_back("prefix", full_prefix);
    if (delimited) req.query.emplace_back("delimiter", "/");
    if (!token.empty()) req.query.emplace_back("continuation-token", token);
    absl::StatusOr<Response> resp_or = Send(req);
    absl::Status err = resp_or.status();
    if (err.ok() && resp_or->status != 200) err = HttpError(req, *resp_or);
    if (!err.ok()) {
      return absl::Status(err.code(), absl::StrCat(err.message(), " (", what, ")"));
    }
    Response& resp = *resp_or;
    absl::StatusOr<ListPage> page = ParseListObjectsV2(resp.body);
    if (!page.ok()) {
      return absl::InternalError(absl::StrCat("S3 list s3://", options_.bucket, "/",
                                              full_prefix, ": ", page.status().message()));
    }
    for (ObjectInfo& info : page->objects) {
      if (!absl::StartsWith(info.key, full_prefix)) continue;
      const size_t slash = delimited ? info.key.find('/', full_prefix.size()) : std::string::npos;
      if (slash != std::string::npos) {  // the server ignored the delimiter
        out.common_prefixes.push_back(info.key.substr(root.size(), slash + 1 - root.size()));
        continue;
      }
      info.key.erase(0, root.size());
      out.objects.push_back(std::move(info));
    }
    for (std::string& common : page->common_prefixes) {
      if (!delimited || !absl::StartsWith(common, full_prefix)) continue;
      common.erase(0, root.size());
      out.common_prefixes.push_back(std::move(common));
    }
    if (!page->truncated) break;
    if (page->next_continuation_token.empty() || page->next_continuation_token == token) {
      return absl::InternalError(absl::StrCat(
          "S3 list s3://", options_.bucket, "/", full_prefix,
          ": truncated page without a new NextContinuationToken"));
    }
    token = std::move(page->next_continuation_token);
  }
  std::sort(out.objects.begin(), out.objects.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  std::sort(out.common_prefixes.begin(), out.common_prefixes.end());
  out.common_prefixes.erase(std::unique(out.common_prefixes.begin(), out.common_prefixes.end()),
                            out.common_prefixes.end());
  return out;
}

absl::StatusOr<std::vector<ObjectInfo>> S3Store::List(const std::string& prefix) {
  ASSIGN_OR_RETURN(DirectoryListing all, ListPaged(prefix, /*delimited=*/false));
  return std::move(all.objects);
}

absl::StatusOr<DirectoryListing> S3Store::ListDirectory(const std::string& prefix) {
  return ListPaged(prefix, /*delimited=*/true);
}

}  // namespace zephon::storage

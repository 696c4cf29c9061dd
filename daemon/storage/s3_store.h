// S3Store: ObjectStore over the S3 REST API (AWS S3 or a compatible server such as
// MinIO or s3rver), speaking HTTP(S) through libcurl, which also signs (SigV4, sigv4.h).
// One store is one bucket plus an optional key prefix ("s3://bucket/prefix" roots the
// store at "prefix/"); keys passed to its methods are relative to that root.
//
// Configuration: S3Options fields left empty come from the environment and the AWS
// shared files, as the AWS CLI does (precedence and which files are read: aws_config.h):
//   endpoint     AWS_ENDPOINT_URL, else https://s3.<region>.amazonaws.com
//   region       AWS_REGION, AWS_DEFAULT_REGION, the profile's region, else us-east-1
//   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), else
//                the profile's; none is an error at Open. No instance metadata, SSO or
//                assume-role.
//   addressing   path-style by default for a custom endpoint, or a bucket with '.' over
//                https (AWS's wildcard certificate covers one label); else virtual-host.
//
// Semantics: Put is one PUT of the whole object (readers see the old or the new
// object). Every request carries x-amz-content-sha256 of its payload and every PUT
// Content-MD5, so S3 rejects a body corrupted in transit instead of storing it.
// Each attempt has a connect timeout and a total timeout (request_timeout); retries and
// their pauses follow s3_retry.h, so one HTTP request blocks at most about
// max_attempts * request_timeout + (max_attempts - 1) * kS3MaxBackoff. The bound is per
// request: Head of a missing key sends a second one (HeadBucket), List and
// ListDirectory one per page.
//
// Errors name the operation, bucket, key, HTTP status and S3's error Code and Message
// (worded by s3_response.h):
//   404 NoSuchKey -> NOT_FOUND; NoSuchBucket -> FAILED_PRECONDITION (never mistaken for
//   a missing key); 403 -> PERMISSION_DENIED; BadDigest / XAmzContentSHA256Mismatch ->
//   DATA_LOSS; 412 of a conditional read -> VersionMismatchError; 501 -> UNIMPLEMENTED
//   (never retried); 400 RequestTimeout, other 5xx and connection errors after the last
//   attempt -> UNAVAILABLE; other 4xx -> INVALID_ARGUMENT / FAILED_PRECONDITION;
//   timeouts -> DEADLINE_EXCEEDED.
//
// Thread-safety: thread-safe (immutable after Open; one libcurl easy handle per call).
#ifndef ZEPHON_DAEMON_STORAGE_S3_STORE_H_
#define ZEPHON_DAEMON_STORAGE_S3_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/storage/object_store.h"
#include "daemon/storage/s3_counters.h"
#include "daemon/storage/s3_retry.h"
#include "daemon/storage/sigv4.h"

namespace zephon::storage {

struct S3Response;        // s3_response.h
struct S3RequestContext;  // s3_response.h

struct S3Options {
  std::string bucket;  // required; S3 naming rules as in ParseS3Url
  std::string prefix;  // store root inside the bucket; "" or "a/b" ('/' added)
  std::string endpoint;  // "http://127.0.0.1:4568"; "" -> environment / AWS default
  std::string region;    // "" -> environment / config file / us-east-1
  std::optional<bool> path_style;  // unset -> custom endpoint, or https + '.' in bucket
  SigV4Credentials credentials;    // empty access_key -> environment / shared files
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration request_timeout = absl::Seconds(60);  // per attempt, whole transfer
  int max_attempts = 4;                                 // >= 1
  absl::Duration initial_backoff = absl::Milliseconds(100);  // jitter ceiling; doubles
  int list_page_size = 1000;  // ListObjectsV2 max-keys, 1..1000
  // Where every call is counted (zephond's, exported as metrics); null = not counted.
  std::shared_ptr<S3Counters> counters;
};

class S3Store final : public ObjectStore {
 public:
  // Fills unset options from the environment and the AWS shared files and validates
  // them. INVALID_ARGUMENT for a bad bucket, prefix, endpoint or limit, or a malformed
  // shared file; FAILED_PRECONDITION when no credentials are configured or AWS_PROFILE
  // names a missing profile. Does not contact the server.
  static absl::StatusOr<std::unique_ptr<S3Store>> Open(S3Options options);

  // Open for "s3://bucket[/prefix]" starting from `defaults` (the owner's S3 settings:
  // zephond's and zephonctl's --s3-* flags, S3OptionsFromFlags in s3_flags.h; its
  // bucket, prefix and credentials are ignored, credentials stay in the environment or
  // the shared files), the rest from the environment. A finite `call_budget` bounds
  // each call, retries included: the per-attempt timeout shrinks to call_budget /
  // max_attempts (at least 1 s), for callers that must answer before a deadline.
  static absl::StatusOr<std::unique_ptr<S3Store>> OpenUrl(
      const std::string& url, const S3Options& defaults,
      absl::Duration call_budget = absl::InfiniteDuration());

  S3Store(const S3Store&) = delete;
  S3Store& operator=(const S3Store&) = delete;

  const S3Options& options() const { return options_; }

  // Conditional reads (if_version non-empty) send If-Match: "<etag>"; S3's 412
  // PreconditionFailed becomes VersionMismatchError naming s3://bucket/key. A server
  // that ignores If-Match (s3rver 3.7) is caught by comparing the ETag of its 200/206
  // response with if_version; either way no bytes of another version come back.
  absl::StatusOr<std::string> Get(const std::string& key,
                                  const std::string& if_version = "") override;
  // A 206 answer must carry Content-Range "bytes a-b/total" with a == offset,
  // b - a + 1 == the body's length, no more bytes than asked for, and fewer only when b
  // is the object's last byte; anything else is DATA_LOSS naming the object, the range
  // asked for and the server's. A 206 without Content-Range (not S3, but some proxies)
  // is accepted only when its body is non-empty and no longer than `length` (a shorter
  // one cannot be checked and is read as the object's end).
  absl::StatusOr<std::string> GetRange(const std::string& key, uint64_t offset,
                                       uint64_t length,
                                       const std::string& if_version = "") override;
  absl::Status Put(const std::string& key, std::string_view bytes) override;
  // ListObjectsV2, one request per page of list_page_size keys, so a listing of N keys
  // may take ceil(N / list_page_size) times the per-request bound above.
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  // ListObjectsV2 with delimiter=/, paged like List (list_page_size entries per page,
  // objects and common prefixes counted together, as S3 does). A common prefix that
  // comes back on two pages is kept once; a server that ignores the delimiter still
  // gives the right answer (deeper keys are rolled up here), only more slowly.
  absl::StatusOr<DirectoryListing> ListDirectory(const std::string& prefix) override;
  absl::Status Delete(const std::string& key) override;
  // NOT_FOUND for a missing key; FAILED_PRECONDITION (NoSuchBucket) for a missing
  // bucket, found with one extra HeadBucket request after the 404.
  absl::StatusOr<ObjectInfo> Head(const std::string& key) override;

 private:
  struct Request;
  using Response = S3Response;

  S3Store(S3Options options, std::string scheme, std::string host)
      : options_(std::move(options)), scheme_(std::move(scheme)), host_(std::move(host)) {}

  // Sends `request` with retries; any HTTP status comes back as a Response, transport
  // failures after the last attempt as UNAVAILABLE / DEADLINE_EXCEEDED.
  absl::StatusOr<Response> Send(const Request& request) const;
  // Send without the counting; `attempts` is set to the attempts made.
  absl::StatusOr<Response> SendWithRetries(const Request& request, int* attempts) const;
  absl::StatusOr<Response> SendOnce(const Request& request) const;
  // What error messages about `request` name: operation, object, bucket, endpoint.
  S3RequestContext Context(const Request& request) const;
  // The Status for a non-2xx `response` to `request` (S3HttpError, s3_response.h).
  absl::Status HttpError(const Request& request, const Response& response) const;
  // After a bodiless 404 to `request`: one HeadBucket. FAILED_PRECONDITION (NoSuchBucket)
  // when that is 404 too, its transport error when it fails, OK otherwise.
  absl::Status BucketMissingAfter404(const Request& request) const;

  // Every page of ListObjectsV2 for `prefix` (relative to the store root), keys relative
  // to the root, sorted; with `delimited`, delimiter=/ (deeper keys as common prefixes).
  absl::StatusOr<DirectoryListing> ListPaged(const std::string& prefix, bool delimited) const;

  std::string FullKey(const std::string& key) const;
  std::string Describe(const std::string& full_key) const;  // "s3://bucket/key"

  const S3Options options_;  // all fields resolved
  const std::string scheme_;  // "http" or "https"
  const std::string host_;    // "host[:port]" of the endpoint
};

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_S3_STORE_H_

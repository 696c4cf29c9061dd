// S3Store: ObjectStore over the S3 REST API (AWS S3 or a compatible server such as
// MinIO or s3rver), speaking HTTP(S) through libcurl with AWS Signature V4 (sigv4.h).
// One store is one bucket plus an optional key prefix ("s3://bucket/prefix" roots the
// store at "prefix/"); keys passed to its methods are relative to that root.
//
// Configuration (S3Options; empty fields fall back to the environment and the AWS
// shared files, as the AWS CLI does; see aws_config.h):
//   endpoint     AWS_ENDPOINT_URL, else https://s3.<region>.amazonaws.com
//   region       AWS_REGION, else AWS_DEFAULT_REGION, else the profile's region in the
//                config file (~/.aws/config), else us-east-1
//   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), else
//                the profile (AWS_PROFILE, default "default") in ~/.aws/credentials,
//                else in ~/.aws/config; with none, Open fails. Instance metadata, SSO
//                and assume-role profiles are NOT supported.
//   addressing   path-style (http://host/bucket/key) or virtual-host style
//                (http://bucket.host/key); by default path-style iff a custom endpoint
//                is set.
// The shared files are read only when a field above is still unset or AWS_PROFILE is
// set (a named profile must then exist).
//
// Semantics: Put is one PUT of the whole object, so readers see the old or the new
// object, never a mix, and an interrupted upload stores nothing (S3's own atomicity;
// note that s3rver, the test server, does keep a truncated body). Every request is
// signed with x-amz-content-sha256 = SHA-256 of the payload, and every PUT carries
// Content-MD5, so S3 rejects a body corrupted in transit (400 BadDigest /
// XAmzContentSHA256Mismatch) instead of storing it.
//
// Each attempt has a connect timeout and a total timeout. Connection errors (including
// a connection cut mid-body, CURLE_PARTIAL_FILE), timeouts, HTTP 5xx, 429 and digest
// mismatches are retried with exponential backoff up to max_attempts, so no call blocks
// longer than about max_attempts * (request_timeout + backoff).
//
// Errors name the operation, bucket, key, HTTP status and S3's error Code and Message:
//   404 NoSuchKey -> NOT_FOUND; NoSuchBucket -> FAILED_PRECONDITION (not NOT_FOUND, so a
//   missing bucket is never mistaken for a missing key); 403 -> PERMISSION_DENIED;
//   BadDigest / XAmzContentSHA256Mismatch -> DATA_LOSS (after the last attempt);
//   412 PreconditionFailed of a conditional read -> FAILED_PRECONDITION
//   (VersionMismatchError: the object changed); other 4xx -> INVALID_ARGUMENT /
//   FAILED_PRECONDITION; 5xx and connection errors after the last attempt ->
//   UNAVAILABLE; timeouts -> DEADLINE_EXCEEDED. Transport errors say
//   what happened ("the server closed the connection before the whole body arrived")
//   with curl's own detail, and for a PUT how many body bytes were sent.
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
#include "daemon/storage/sigv4.h"

namespace zephon::storage {

struct S3Options {
  std::string bucket;  // required; S3 naming rules as in ParseS3Url
  std::string prefix;  // store root inside the bucket; "" or "a/b" ('/' added)
  std::string endpoint;  // "http://127.0.0.1:4568"; "" -> environment / AWS default
  std::string region;    // "" -> environment / config file / us-east-1
  std::optional<bool> path_style;  // unset -> path-style iff a custom endpoint is used
  SigV4Credentials credentials;    // empty access_key -> environment / shared files
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration request_timeout = absl::Seconds(60);  // per attempt, whole transfer
  int max_attempts = 4;                                 // >= 1
  absl::Duration initial_backoff = absl::Milliseconds(100);  // doubles per retry
  int list_page_size = 1000;  // ListObjectsV2 max-keys, 1..1000
};

// Process-wide starting point of S3Store::OpenUrl, and so of OpenStore for every s3://
// aggregate_dir and dataset: endpoint, region, addressing, timeouts, attempts, backoff.
// Fields it leaves empty or unset still come from the environment. zephond and zephonctl
// set it once from their --s3-* flags at startup; bucket, prefix and credentials are
// ignored (credentials stay in the environment or the shared files). Thread-safe.
void SetS3Defaults(const S3Options& defaults);
S3Options S3Defaults();

class S3Store final : public ObjectStore {
 public:
  // Fills unset options from the environment and the AWS shared files and validates
  // them. INVALID_ARGUMENT for a bad bucket, prefix, endpoint or limit, or a malformed
  // shared file; FAILED_PRECONDITION when no credentials are configured or AWS_PROFILE
  // names a missing profile. Does not contact the server.
  static absl::StatusOr<std::unique_ptr<S3Store>> Open(S3Options options);

  // Open for "s3://bucket[/prefix]" starting from S3Defaults(), the rest from the
  // environment.
  static absl::StatusOr<std::unique_ptr<S3Store>> OpenUrl(const std::string& url);

  S3Store(const S3Store&) = delete;
  S3Store& operator=(const S3Store&) = delete;

  const S3Options& options() const { return options_; }

  // Conditional reads (if_version non-empty) send If-Match: "<etag>"; S3's 412
  // PreconditionFailed becomes VersionMismatchError naming s3://bucket/key. A server
  // that ignores If-Match (s3rver 3.7) is caught by comparing the ETag of its 200/206
  // response with if_version; either way no bytes of another version come back.
  absl::StatusOr<std::string> Get(const std::string& key,
                                  const std::string& if_version = "") override;
  absl::StatusOr<std::string> GetRange(const std::string& key, uint64_t offset,
                                       uint64_t length,
                                       const std::string& if_version = "") override;
  absl::Status Put(const std::string& key, std::string_view bytes) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  // ListObjectsV2 with delimiter=/, paged like List (list_page_size entries per page,
  // objects and common prefixes counted together, as S3 does). A common prefix that
  // comes back on two pages is kept once; a server that ignores the delimiter still
  // gives the right answer (deeper keys are rolled up here), only more slowly.
  absl::StatusOr<DirectoryListing> ListDirectory(const std::string& prefix) override;
  absl::Status Delete(const std::string& key) override;
  absl::StatusOr<ObjectInfo> Head(const std::string& key) override;

 private:
  struct Request;
  struct Response;

  S3Store(S3Options options, std::string scheme, std::string host)
      : options_(std::move(options)), scheme_(std::move(scheme)), host_(std::move(host)) {}

  // Sends `request` with retries; any HTTP status comes back as a Response, transport
  // failures after the last attempt as UNAVAILABLE / DEADLINE_EXCEEDED.
  absl::StatusOr<Response> Send(const Request& request) const;
  absl::StatusOr<Response> SendOnce(const Request& request) const;
  // The Status for a non-2xx `response` to `request`.
  absl::Status HttpError(const Request& request, const Response& response) const;
  // VersionMismatchError when `response` to a conditional GET is 412, or a 200/206 whose
  // ETag is not `if_version`; OK otherwise (and always when `if_version` is "").
  absl::Status CheckVersion(const Request& request, const Response& response,
                            const std::string& if_version) const;

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

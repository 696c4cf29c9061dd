// SignWithCurl (libcurl's CURLOPT_AWS_SIGV4) against the worked examples of the S3 API
// reference, "Signature Calculations for the Authorization Header"
// (AKIAIOSFODNN7EXAMPLE, 20130524T000000Z, us-east-1/s3): each request goes to a local
// one-shot HTTP server that keeps its head, and the Authorization curl sent must carry
// AWS's signature. The x-amz-date header pins curl's clock to the example's.
#include "daemon/storage/sigv4.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/digest.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

constexpr char kEmptySha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr char kHost[] = "examplebucket.s3.amazonaws.com";

SigV4Credentials S3Credentials() {
  return {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
}

// Accepts one connection on 127.0.0.1, keeps the request head (up to the blank line)
// and answers 200 without reading a body.
class OneShotServer {
 public:
  OneShotServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd_, 1) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      while (!absl::StrContains(head_, "\r\n\r\n")) {
        const ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        head_.append(buf, static_cast<size_t>(n));
      }
      head_ = head_.substr(0, head_.find("\r\n\r\n"));
      constexpr char kAnswer[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      (void)!write(c, kAnswer, sizeof(kAnswer) - 1);
      close(c);
    });
  }
  ~OneShotServer() {
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  // The request head; waits for the request.
  std::string head() {
    if (thread_.joinable()) thread_.join();
    return head_;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::string head_;
};

struct Sent {
  std::string head;           // request line and headers as received
  std::string authorization;  // the Authorization header's value
  std::vector<std::string> signed_headers;
};

// Sends `method` `path_and_query` to kHost (connected to a OneShotServer) with `headers`
// plus what SignWithCurl adds, and returns what arrived.
Sent SendSigned(const std::string& method, const std::string& path_and_query,
                HeaderList headers, absl::string_view body = "",
                const SigV4Credentials& credentials = S3Credentials()) {
  OneShotServer server;
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), &curl_easy_cleanup);
  CURL* c = curl.get();
  SignWithCurl(c, "us-east-1", credentials, Sha256Hex(body), &headers);
  curl_slist* list = nullptr;
  for (const auto& [name, value] : headers) {
    list = curl_slist_append(list, absl::StrCat(name, ": ", value).c_str());
  }
  curl_slist* connect_to = curl_slist_append(
      nullptr, absl::StrCat(kHost, ":80:127.0.0.1:", server.port()).c_str());
  const std::string url = absl::StrCat("http://", kHost, path_and_query);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CONNECT_TO, connect_to);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
  if (method == "PUT") {
    // The server answers before the body; the head is all that is signed.
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(c, CURLOPT_READFUNCTION,
                     +[](char*, size_t, size_t, void*) -> size_t { return 0; });
  } else if (method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  curl_easy_perform(c);  // the answer does not matter, only what was sent
  curl_slist_free_all(list);
  curl_slist_free_all(connect_to);

  Sent sent;
  sent.head = server.head();
  for (absl::string_view line : absl::StrSplit(sent.head, "\r\n")) {
    if (absl::ConsumePrefix(&line, "Authorization: ")) sent.authorization = std::string(line);
  }
  const size_t at = sent.authorization.find("SignedHeaders=");
  if (at != std::string::npos) {
    const std::string names = sent.authorization.substr(
        at + 14, sent.authorization.find(',', at) - at - 14);
    sent.signed_headers = absl::StrSplit(names, ';');
  }
  return sent;
}

std::string SignatureOf(const Sent& sent) {
  const size_t at = sent.authorization.find("Signature=");
  return at == std::string::npos ? "" : sent.authorization.substr(at + 10);
}

// Every signed header must be sent, or S3 computes another canonical request.
void ExpectSignedHeadersSent(const Sent& sent) {
  ASSERT_FALSE(sent.signed_headers.empty()) << sent.head;
  const std::string head = absl::AsciiStrToLower(sent.head);
  for (const std::string& name : sent.signed_headers) {
    EXPECT_TRUE(absl::StrContains(head, absl::StrCat("\r\n", name, ":")))
        << name << " is signed but not sent:\n" << sent.head;
  }
}

TEST(SignWithCurl, GetObjectWithRange) {
  const Sent sent = SendSigned(
      "GET", "/test.txt", {{"Range", "bytes=0-9"}, {"x-amz-date", "20130524T000000Z"}});
  EXPECT_EQ(sent.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
      << sent.head;
  EXPECT_TRUE(absl::StrContains(sent.head, absl::StrCat("x-amz-content-sha256: ", kEmptySha256)));
  ExpectSignedHeadersSent(sent);
}

// The payload hash of an upload comes from our x-amz-content-sha256 header (curl 7.88
// would hash an empty body), and '$' in the key goes out encoded as AWS signs it.
TEST(SignWithCurl, PutObjectSignsTheBodyHashAndTheEncodedPath) {
  const std::string body = "Welcome to Amazon S3.";
  const Sent sent = SendSigned("PUT", "/" + AwsUriEncode("test$file.text", true),
                               {{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                                {"x-amz-date", "20130524T000000Z"},
                                {"x-amz-storage-class", "REDUCED_REDUNDANCY"}},
                               body);
  EXPECT_TRUE(absl::StartsWith(sent.head, "PUT /test%24file.text HTTP/1.1")) << sent.head;
  EXPECT_EQ(sent.signed_headers,
            (std::vector<std::string>{"date", "host", "x-amz-content-sha256", "x-amz-date",
                                      "x-amz-storage-class"}));
  EXPECT_EQ(SignatureOf(sent), "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
  ExpectSignedHeadersSent(sent);
}

TEST(SignWithCurl, ValuelessQueryParameterGoesOutAsNameEquals) {
  const std::string query = CanonicalQuery({{"lifecycle", ""}});
  EXPECT_EQ(query, "lifecycle=");
  const Sent sent = SendSigned("GET", "/?" + query, {{"x-amz-date", "20130524T000000Z"}});
  EXPECT_EQ(SignatureOf(sent), "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
      << sent.head;
}

TEST(SignWithCurl, ListObjectsQueryIsSortedBeforeCurlSignsIt) {
  const std::string query = CanonicalQuery({{"prefix", "J"}, {"max-keys", "2"}});
  EXPECT_EQ(query, "max-keys=2&prefix=J");
  const Sent sent = SendSigned("GET", "/?" + query, {{"x-amz-date", "20130524T000000Z"}});
  EXPECT_EQ(SignatureOf(sent), "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
      << sent.head;
}

TEST(SignWithCurl, SessionTokenIsSentAndSigned) {
  SigV4Credentials credentials = S3Credentials();
  credentials.session_token = "TOKEN/with+chars=";
  const Sent sent = SendSigned("GET", "/k", {{"If-Match", "\"etag\""}}, "", credentials);
  EXPECT_EQ(sent.signed_headers,
            (std::vector<std::string>{"host", "if-match", "x-amz-content-sha256", "x-amz-date",
                                      "x-amz-security-token"}))
      << sent.head;
  EXPECT_TRUE(absl::StrContains(sent.head, "x-amz-security-token: TOKEN/with+chars=")) << sent.head;
  EXPECT_EQ(SignatureOf(sent).size(), 64u);
  ExpectSignedHeadersSent(sent);
}

TEST(CanonicalQuery, EncodesNamesAndValuesWithSlashAndSortsByEncodedName) {
  EXPECT_EQ(CanonicalQuery({}), "");
  EXPECT_EQ(CanonicalQuery({{"prefix", "a b/c+d"}, {"continuation-token", "x=y"},
                            {"list-type", "2"}}),
            "continuation-token=x%3Dy&list-type=2&prefix=a%20b%2Fc%2Bd");
}

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

}  // namespace
}  // namespace zephon::storage

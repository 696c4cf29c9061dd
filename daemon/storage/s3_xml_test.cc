#include "daemon/storage/s3_xml.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

TEST(XmlUnescape, DecodesNamedAndNumericEntities) {
  EXPECT_EQ(XmlUnescape("a&amp;b&lt;c&gt;d&quot;e&apos;f"), "a&b<c>d\"e'f");
  EXPECT_EQ(XmlUnescape("&#65;&#x42;&#xe9;"), "AB\xc3\xa9");
  EXPECT_EQ(XmlUnescape("x &unknown; & y &#xZZ;"), "x &unknown; & y &#xZZ;");
}

// Found by the s3_xml fuzz target (docs/reliability.md): &#0; put a NUL and &#xD800; a
// lone surrogate (invalid UTF-8) into object keys. XML 1.0 allows references only to
// its Char production, so others are malformed and, like every malformed entity, kept.
TEST(XmlUnescape, KeepsReferencesToNonXmlCharactersVerbatim) {
  for (const char* bad : {"&#0;", "&#x0;", "&#1;", "&#x1F;", "&#xD800;", "&#xDFFF;",
                          "&#55296;", "&#xFFFE;", "&#xFFFF;", "&#x110000;"}) {
    EXPECT_EQ(XmlUnescape(bad), bad);
  }
  EXPECT_EQ(XmlUnescape("&#9;&#xA;&#13;&#x20;&#xD7FF;&#xE000;&#xFFFD;&#x10000;&#x10FFFF;"),
            "\t\n\r \xed\x9f\xbf\xee\x80\x80\xef\xbf\xbd\xf0\x90\x80\x80\xf4\x8f\xbf\xbf");
  auto page = ParseListObjectsV2(
      "<ListBucketResult><Contents><Key>a&#0;b</Key><Size>1</Size></Contents>"
      "</ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "a&#0;b");
}

TEST(ParseListObjectsV2, ReadsEntriesAndContinuation) {
  const char* xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
      "<IsTruncated>true</IsTruncated><NextContinuationToken>t&amp;1</NextContinuationToken>"
      "<Contents><Key>p/a&amp;b.bin</Key><LastModified>2024-01-02T03:04:05.000Z"
      "</LastModified><ETag>&quot;x&quot;</ETag><Size>12</Size></Contents>"
      "<Contents><Key>p/c</Key><LastModified>bad</LastModified><Size>0</Size></Contents>"
      "</ListBucketResult>";
  auto page = ParseListObjectsV2(xml);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "p/a&b.bin");
  EXPECT_EQ(page->objects[0].size, 12u);
  EXPECT_EQ(page->objects[0].mtime, absl::FromUnixSeconds(1704164645));
  EXPECT_EQ(page->objects[0].version, "x");
  EXPECT_EQ(page->objects[1].mtime, absl::InfinitePast());
  EXPECT_EQ(page->objects[1].version, "");
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_continuation_token, "t&1");
}

TEST(ParseListObjectsV2, ReadsCommonPrefixesOfADelimitedListing) {
  const char* xml =
      "<ListBucketResult><Name>b</Name><Prefix>p/</Prefix><Delimiter>/</Delimiter>"
      "<IsTruncated>false</IsTruncated>"
      "<Contents><Key>p/top.bin</Key><Size>3</Size></Contents>"
      "<CommonPrefixes><Prefix>p/a&amp;b/</Prefix></CommonPrefixes>"
      "<CommonPrefixes>\n  <Prefix>p/sub/</Prefix>\n</CommonPrefixes>"
      "<CommonPrefixes/>"
      "</ListBucketResult>";
  auto page = ParseListObjectsV2(xml);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 1u);  // the top-level <Prefix> is not a common prefix
  EXPECT_EQ(page->objects[0].key, "p/top.bin");
  EXPECT_EQ(page->common_prefixes, (std::vector<std::string>{"p/a&b/", "p/sub/"}));
  EXPECT_FALSE(page->truncated);

  auto plain = ParseListObjectsV2("<ListBucketResult><Prefix>p/</Prefix>"
                                  "<Contents><Key>p/x/y</Key><Size>1</Size></Contents>"
                                  "</ListBucketResult>");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->common_prefixes.empty());

  for (const char* bad : {"<CommonPrefixes><Key>x</Key></CommonPrefixes>",
                          "<CommonPrefixes><Prefix></Prefix></CommonPrefixes>"}) {
    auto page = ParseListObjectsV2(absl::StrCat("<ListBucketResult>", bad, "</ListBucketResult>"));
    EXPECT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(page.status().message().find("CommonPrefixes"), std::string::npos) << page.status();
  }
}

TEST(ParseListObjectsV2, RejectsOtherDocumentsAndBadSizes) {
  EXPECT_FALSE(ParseListObjectsV2("<Error><Code>X</Code></Error>").ok());
  EXPECT_FALSE(ParseListObjectsV2(
                   "<ListBucketResult><Contents><Key>k</Key><Size>x</Size></Contents>"
                   "</ListBucketResult>")
                   .ok());
  auto empty = ParseListObjectsV2("<ListBucketResult><IsTruncated>false</IsTruncated>"
                                  "</ListBucketResult>");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->objects.empty());
  EXPECT_FALSE(empty->truncated);
}

// The hand-written reader took CDATA sections as text with their markup, matched
// "<Key" inside comments, and read a truncated document as far as it went.
TEST(ParseListObjectsV2, ReadsCdataSkipsCommentsAndRejectsMalformedXml) {
  auto page = ParseListObjectsV2(
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<!-- <Contents><Key>ghost</Key><Size>1</Size></Contents> -->"
      "<Contents><Key><![CDATA[a<&>b]]>&amp;c</Key><Size>5</Size></Contents>"
      "</ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "a<&>b&c");

  auto truncated = ParseListObjectsV2(
      "<ListBucketResult><Contents><Key>k</Key><Size>1</Size></Contents><Contents><Key>k2");
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(truncated.status().message().find("not well-formed"), std::string::npos)
      << truncated.status();

  bool found = true;
  EXPECT_EQ(XmlElementText("<html><body>502 Bad Gateway", "Code", &found), "");
  EXPECT_FALSE(found);
  EXPECT_EQ(XmlElementText("<Error><Code><![CDATA[Slow]]>Down</Code></Error>", "Code", &found),
            "SlowDown");
  EXPECT_TRUE(found);
}

TEST(ParseS3Error, JoinsCodeAndMessage) {
  EXPECT_EQ(ParseS3Error("<Error><Code>NoSuchBucket</Code><Message>The specified bucket "
                         "does not exist</Message><BucketName>b</BucketName></Error>"),
            "NoSuchBucket: The specified bucket does not exist");
  EXPECT_EQ(ParseS3Error("<ListBucketResult/>"), "");
}

}  // namespace
}  // namespace zephon::storage

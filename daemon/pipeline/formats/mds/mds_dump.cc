// mds_dump: prints the records of an MDS dataset directory, one JSON line per sample,
// as OpenMdsIndex and OpenMdsRecords read them (tests/mds compares this with what the
// writer wrote; also handy to look into a dataset).
//
//   mds_dump --field F --kind text|tokens DIR
//     {"shard":"shard.00000.mds.zstd","sample":0,"text":"..."}   (kind text)
//     {"shard":"shard.00000.mds","sample":0,"tokens":[1,2,3]}     (kind tokens)
//   mds_dump --info DIR
//     {"samples":N,"shards":S,"checksum":"<sha256 of index.json>"}
// Errors go to stderr as the reader's status (code and message); the exit status is 1.
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/mds/mds_index.h"
#include "daemon/pipeline/formats/mds/mds_records.h"
#include "daemon/pipeline/formats/record_source.h"
#include "daemon/pipeline/formats/shard_file.h"

namespace zephon::pipeline::mds {
namespace {

// A JSON string literal of UTF-8 `s` (already validated by the reader).
std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c < 0x20) {
      absl::StrAppend(&out, "\\u00", absl::Hex(c, absl::kZeroPad2));
    } else {
      out.push_back(ch);
    }
  }
  out.push_back('"');
  return out;
}

absl::Status Run(bool info, const RecordField& field, const std::string& dir) {
  const std::string index_path = absl::StrCat(dir, "/index.json");
  ASSIGN_OR_RETURN(std::unique_ptr<ShardFile> index_file, OpenLocalShardFile(index_path));
  ASSIGN_OR_RETURN(MdsIndex index, OpenMdsIndex(*index_file));
  if (info) {
    std::printf("{\"samples\":%llu,\"shards\":%zu,\"checksum\":\"%s\"}\n",
                static_cast<unsigned long long>(index.samples), index.shards.size(),
                index.checksum.c_str());
    return absl::OkStatus();
  }
  for (const MdsShardInfo& shard : index.shards) {
    const std::string& basename = shard.stored().basename;
    ASSIGN_OR_RETURN(std::unique_ptr<ShardFile> file,
                     OpenLocalShardFile(MdsShardPath(index_path, shard)));
    ASSIGN_OR_RETURN(std::unique_ptr<RecordSource> source,
                     OpenMdsRecords(shard, std::move(file), field));
    RecordSource::Value value;
    for (uint64_t i = 0;; ++i) {
      ASSIGN_OR_RETURN(bool more, source->Next(&value));
      if (!more) break;
      std::string line = absl::StrCat("{\"shard\":", Quote(basename), ",\"sample\":", i, ",");
      if (value.kind == RecordSource::Value::Kind::kText) {
        absl::StrAppend(&line, "\"text\":", Quote(absl::string_view(value.text.data(), value.text.size())), "}\n");
      } else {
        absl::StrAppend(&line, "\"tokens\":[", absl::StrJoin(value.tokens, ","), "]}\n");
      }
      std::fwrite(line.data(), 1, line.size(), stdout);
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace zephon::pipeline::mds

int main(int argc, char** argv) {
  using zephon::pipeline::RecordField;
  RecordField field;
  bool info = false;
  std::string dir;
  std::string kind;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--field" && i + 1 < argc) {
      field.name = argv[++i];
    } else if (arg == "--kind" && i + 1 < argc) {
      kind = argv[++i];
    } else if (arg == "--info") {
      info = true;
    } else if (dir.empty() && !arg.empty() && arg[0] != '-') {
      dir = std::string(arg);
    } else {
      dir.clear();
      break;
    }
  }
  if (kind == "text") {
    field.kind = RecordField::Kind::kText;
  } else if (kind == "tokens") {
    field.kind = RecordField::Kind::kTokens;
  } else if (!info) {
    dir.clear();
  }
  if (dir.empty() || (!info && field.name.empty())) {
    std::fprintf(stderr, "usage: mds_dump --field F --kind text|tokens DIR | mds_dump --info DIR\n");
    return 2;
  }
  const absl::Status s = zephon::pipeline::mds::Run(info, field, dir);
  if (!s.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

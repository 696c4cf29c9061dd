// parquet_dump: prints one Parquet column through OpenParquetRecords, for the tests that
// compare it with DuckDB's readback and for the decode benchmark.
//   parquet_dump --field F --kind text|tokens FILE   one JSON line per record:
//       {"text": "..."} | {"tokens": [1, 2]} | null
//   parquet_dump --sum ...                            one line: records, nulls and the
//       total text bytes (or token count), decoding everything but printing nothing else.
// Exits 1 with the error on stderr.
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/pipeline/formats/parquet/parquet_records.h"
#include "daemon/pipeline/formats/shard_file.h"
#include "tokenizer/canonical_json.h"

namespace {

using zephon::pipeline::RecordField;
using zephon::pipeline::RecordSource;

int Usage() {
  std::fprintf(stderr, "usage: parquet_dump [--sum] --field F --kind text|tokens FILE\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  RecordField field;
  bool sum = false, have_kind = false;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--sum") {
      sum = true;
    } else if (arg == "--field" && i + 1 < argc) {
      field.name = argv[++i];
    } else if (arg == "--kind" && i + 1 < argc) {
      const std::string kind = argv[++i];
      if (kind != "text" && kind != "tokens") return Usage();
      field.kind = kind == "text" ? RecordField::Kind::kText : RecordField::Kind::kTokens;
      have_kind = true;
    } else if (path.empty() && arg[0] != '-') {
      path = arg;
    } else {
      return Usage();
    }
  }
  if (path.empty() || field.name.empty() || !have_kind) return Usage();
  auto file = zephon::pipeline::OpenLocalShardFile(path);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.status().ToString().c_str());
    return 1;
  }
  auto source = zephon::pipeline::OpenParquetRecords(*std::move(file), field);
  if (!source.ok()) {
    std::fprintf(stderr, "%s\n", source.status().ToString().c_str());
    return 1;
  }
  RecordSource::Value value;
  uint64_t records = 0, nulls = 0, total = 0;
  std::string line;
  while (true) {
    auto more = (*source)->Next(&value);
    if (!more.ok()) {
      std::fprintf(stderr, "%s\n", more.status().ToString().c_str());
      return 1;
    }
    if (!*more) break;
    ++records;
    if (sum) {
      if (value.kind == RecordSource::Value::Kind::kNull) ++nulls;
      total += value.kind == RecordSource::Value::Kind::kText ? value.text.size()
                                                              : value.tokens.size();
      continue;
    }
    line.clear();
    switch (value.kind) {
      case RecordSource::Value::Kind::kNull:
        line = "null";
        break;
      case RecordSource::Value::Kind::kText:
        line = "{\"text\": ";
        zephon::tokenizer::AppendJsonString(value.text, &line);
        line += "}";
        break;
      case RecordSource::Value::Kind::kTokens:
        line = "{\"tokens\": [";
        for (size_t i = 0; i < value.tokens.size(); ++i) {
          if (i > 0) line += ", ";
          absl::StrAppend(&line, value.tokens[i]);
        }
        line += "]}";
        break;
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  if (sum) {
    std::printf("{\"records\": %llu, \"nulls\": %llu, \"total\": %llu}\n",
                static_cast<unsigned long long>(records), static_cast<unsigned long long>(nulls),
                static_cast<unsigned long long>(total));
  }
  return 0;
}

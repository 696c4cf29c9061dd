#include "daemon/pipeline/formats/mds/mds_index.h"

#include <simdjson.h>

#include <string_view>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/digest.h"
#include "common/status_macros.h"

namespace zephon::pipeline::mds {
namespace {

namespace dom = simdjson::dom;

// Reads typed members of one index.json, naming the file and JSON path in errors.
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {}

  absl::Status Bad(absl::string_view where, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("MDS index ", path_, ": ", where, " ", what));
  }

  absl::StatusOr<dom::element> Member(dom::object obj, absl::string_view where,
                                      absl::string_view key) const {
    dom::element e;
    if (obj[std::string_view(key.data(), key.size())].get(e) != simdjson::SUCCESS) {
      return Bad(absl::StrCat(where, ".", key), "is missing");
    }
    return e;
  }
  absl::StatusOr<dom::object> Object(dom::element e, absl::string_view where) const {
    dom::object o;
    if (e.get(o) != simdjson::SUCCESS) return Bad(where, "is not a JSON object");
    return o;
  }
  absl::StatusOr<dom::array> Array(dom::element e, absl::string_view where) const {
    dom::array a;
    if (e.get(a) != simdjson::SUCCESS) return Bad(where, "is not a JSON array");
    return a;
  }
  absl::StatusOr<absl::string_view> String(dom::element e, absl::string_view where) const {
    std::string_view s;
    if (e.get(s) != simdjson::SUCCESS) return Bad(where, "is not a string");
    return absl::string_view(s.data(), s.size());
  }
  absl::StatusOr<uint64_t> Uint(dom::element e, absl::string_view where) const {
    uint64_t v = 0;
    if (e.get(v) != simdjson::SUCCESS) return Bad(where, "is not a non-negative integer");
    return v;
  }

  absl::StatusOr<MdsFileInfo> FileInfo(dom::element e, const std::string& where) const {
    ASSIGN_OR_RETURN(dom::object o, Object(e, where));
    MdsFileInfo info;
    ASSIGN_OR_RETURN(dom::element b, Member(o, where, "basename"));
    ASSIGN_OR_RETURN(absl::string_view basename, String(b, where + ".basename"));
    const std::vector<absl::string_view> parts = absl::StrSplit(basename, '/');
    if (basename.empty() || basename.front() == '/' ||
        absl::c_linear_search(parts, absl::string_view(".."))) {
      return Bad(where + ".basename",
                 absl::StrCat("\"", basename,
                              "\" is not a path inside the index's directory (empty, absolute "
                              "or with \"..\")"));
    }
    info.basename = std::string(basename);
    ASSIGN_OR_RETURN(dom::element n, Member(o, where, "bytes"));
    ASSIGN_OR_RETURN(info.bytes, Uint(n, where + ".bytes"));
    if (info.bytes > kMaxMdsShardBytes) {
      return Bad(where + ".bytes", absl::StrCat("= ", info.bytes,
                                                " exceeds 4 GiB, more than an MDS shard's "
                                                "uint32 offsets reach"));
    }
    dom::element h;
    if (o["hashes"].get(h) == simdjson::SUCCESS && !h.is_null()) {
      ASSIGN_OR_RETURN(dom::object hashes, Object(h, where + ".hashes"));
      for (dom::key_value_pair kv : hashes) {
        ASSIGN_OR_RETURN(absl::string_view hex,
                         String(kv.value, absl::StrCat(where, ".hashes.", std::string(kv.key))));
        info.hashes.emplace_back(std::string(kv.key), absl::AsciiStrToLower(hex));
      }
    }
    return info;
  }

  absl::StatusOr<MdsShardInfo> Shard(dom::element e, size_t i) const;

 private:
  const std::string& path_;
};

absl::StatusOr<MdsCompression> ParseCompression(absl::string_view text) {
  const absl::string_view family = text.substr(0, text.find(':'));
  if (family == "zstd") return MdsCompression::kZstd;
  if (family == "gz") return MdsCompression::kGzip;
  if (family == "bz2") return MdsCompression::kBzip2;
  if (family == "br") return MdsCompression::kBrotli;
  if (family == "snappy" && text == "snappy") return MdsCompression::kSnappy;
  return absl::UnimplementedError(absl::StrCat(
      "compression \"", text, "\" is not one of Streaming's (zstd, gz, bz2, br, snappy, with "
      "an optional :LEVEL except snappy)"));
}

absl::StatusOr<MdsShardInfo> Reader::Shard(dom::element e, size_t i) const {
  const std::string where = absl::StrCat("shards[", i, "]");
  ASSIGN_OR_RETURN(dom::object o, Object(e, where));
  MdsShardInfo shard;
  shard.index_path = path_;
  shard.shard = i;

  ASSIGN_OR_RETURN(dom::element f, Member(o, where, "format"));
  ASSIGN_OR_RETURN(absl::string_view format, String(f, where + ".format"));
  if (format != "mds") {
    return absl::UnimplementedError(absl::StrCat(
        "MDS index ", path_, ": ", where, " is in Streaming's \"", format,
        "\" format; Zephon reads \"mds\" shards (write the dataset with MDSWriter)"));
  }
  dom::element v;
  if (o["version"].get(v) == simdjson::SUCCESS) {
    ASSIGN_OR_RETURN(uint64_t version, Uint(v, where + ".version"));
    if (version != 2) {
      return absl::UnimplementedError(absl::StrCat("MDS index ", path_, ": ", where,
                                                   " has version ", version,
                                                   "; Streaming's shards are version 2"));
    }
  }
  ASSIGN_OR_RETURN(dom::element s, Member(o, where, "samples"));
  ASSIGN_OR_RETURN(shard.samples, Uint(s, where + ".samples"));

  ASSIGN_OR_RETURN(dom::element nm, Member(o, where, "column_names"));
  ASSIGN_OR_RETURN(dom::array names, Array(nm, where + ".column_names"));
  ASSIGN_OR_RETURN(dom::element en, Member(o, where, "column_encodings"));
  ASSIGN_OR_RETURN(dom::array encodings, Array(en, where + ".column_encodings"));
  ASSIGN_OR_RETURN(dom::element sz, Member(o, where, "column_sizes"));
  ASSIGN_OR_RETURN(dom::array sizes, Array(sz, where + ".column_sizes"));
  if (names.size() != encodings.size() || names.size() != sizes.size()) {
    return Bad(where, absl::StrCat("has ", names.size(), " column_names, ", encodings.size(),
                                   " column_encodings and ", sizes.size(),
                                   " column_sizes (one each per column)"));
  }
  for (size_t c = 0; c < names.size(); ++c) {
    MdsColumn column;
    const std::string cw = absl::StrCat("[", c, "]");
    ASSIGN_OR_RETURN(absl::string_view name, String(names.at(c), where + ".column_names" + cw));
    column.name = std::string(name);
    ASSIGN_OR_RETURN(absl::string_view enc,
                     String(encodings.at(c), where + ".column_encodings" + cw));
    absl::StatusOr<MdsEncoding> encoding = ParseMdsEncoding(enc);
    if (!encoding.ok()) {
      return absl::Status(encoding.status().code(),
                          absl::StrCat("MDS index ", path_, ": ", where, " column \"", name,
                                       "\": ", encoding.status().message()));
    }
    column.encoding = *std::move(encoding);
    dom::element size_e = sizes.at(c);
    if (!size_e.is_null()) {
      ASSIGN_OR_RETURN(uint64_t size, Uint(size_e, where + ".column_sizes" + cw));
      // Streaming's reader treats 0 like null (the value carries its size).
      if (size != 0) column.size = size;
    }
    const std::optional<uint64_t> fixed = column.encoding.FixedSize();
    if (column.size && fixed && *column.size != *fixed) {
      return Bad(where + ".column_sizes" + cw,
                 absl::StrCat("= ", *column.size, " but encoding \"", enc, "\" has ", *fixed,
                              " bytes per value"));
    }
    if (!column.size && fixed) {
      return Bad(where + ".column_sizes" + cw,
                 absl::StrCat("is null but encoding \"", enc, "\" has a fixed size (", *fixed,
                              "), which Streaming's writer always records"));
    }
    for (const MdsColumn& other : shard.columns) {
      if (other.name == column.name) {
        return Bad(where + ".column_names" + cw, absl::StrCat("repeats \"", name, "\""));
      }
    }
    shard.columns.push_back(std::move(column));
  }

  dom::element comp;
  if (o["compression"].get(comp) == simdjson::SUCCESS && !comp.is_null()) {
    ASSIGN_OR_RETURN(absl::string_view text, String(comp, where + ".compression"));
    absl::StatusOr<MdsCompression> c = ParseCompression(text);
    if (!c.ok()) {
      return absl::Status(c.status().code(), absl::StrCat("MDS index ", path_, ": ", where,
                                                          ": ", c.status().message()));
    }
    shard.compression = *c;
    shard.compression_text = std::string(text);
  }
  dom::element hashes;
  if (o["hashes"].get(hashes) == simdjson::SUCCESS && !hashes.is_null()) {
    ASSIGN_OR_RETURN(dom::array list, Array(hashes, where + ".hashes"));
    for (size_t h = 0; h < list.size(); ++h) {
      ASSIGN_OR_RETURN(absl::string_view algo,
                       String(list.at(h), absl::StrCat(where, ".hashes[", h, "]")));
      shard.hashes.emplace_back(algo);
    }
  }
  dom::element limit;
  if (o["size_limit"].get(limit) == simdjson::SUCCESS && !limit.is_null()) {
    ASSIGN_OR_RETURN(shard.size_limit, Uint(limit, where + ".size_limit"));
  }

  ASSIGN_OR_RETURN(dom::element raw, Member(o, where, "raw_data"));
  ASSIGN_OR_RETURN(shard.raw_data, FileInfo(raw, where + ".raw_data"));
  dom::element zip;
  const bool has_zip = o["zip_data"].get(zip) == simdjson::SUCCESS && !zip.is_null();
  if (has_zip) {
    ASSIGN_OR_RETURN(shard.zip_data, FileInfo(zip, where + ".zip_data"));
  }
  if (has_zip != (shard.compression != MdsCompression::kNone)) {
    return Bad(where, has_zip ? "has zip_data but no compression"
                              : absl::StrCat("has compression \"", shard.compression_text,
                                             "\" but no zip_data"));
  }
  // The shard's sample count and its offsets fill 4 bytes each.
  if (shard.samples > shard.raw_data.bytes / 4) {
    return Bad(where + ".samples", absl::StrCat("= ", shard.samples, " cannot fit in ",
                                                shard.raw_data.bytes, " raw bytes"));
  }
  return shard;
}

}  // namespace

absl::string_view MdsCompressionName(MdsCompression c) {
  switch (c) {
    case MdsCompression::kNone: return "none";
    case MdsCompression::kZstd: return "zstd";
    case MdsCompression::kGzip: return "gz";
    case MdsCompression::kBzip2: return "bz2";
    case MdsCompression::kBrotli: return "br";
    case MdsCompression::kSnappy: return "snappy";
  }
  return "?";
}

const MdsColumn* MdsShardInfo::Column(absl::string_view name) const {
  for (const MdsColumn& c : columns) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string MdsShardPath(absl::string_view index_path, const MdsShardInfo& shard) {
  const size_t slash = index_path.rfind('/');
  const absl::string_view dir =
      slash == absl::string_view::npos ? absl::string_view() : index_path.substr(0, slash + 1);
  return absl::StrCat(dir, shard.stored().basename);
}

absl::StatusOr<MdsIndex> ParseMdsIndex(std::string path, absl::string_view json) {
  MdsIndex index;
  index.path = std::move(path);
  index.checksum = Sha256Hex(json);
  Reader reader(index.path);
  dom::parser parser;
  dom::element root;
  const simdjson::padded_string padded(json.data(), json.size());
  if (const auto err = parser.parse(padded).get(root); err != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(absl::StrCat("MDS index ", index.path,
                                                   " is not valid JSON: ",
                                                   simdjson::error_message(err)));
  }
  ASSIGN_OR_RETURN(dom::object top, reader.Object(root, "(top level)"));
  ASSIGN_OR_RETURN(dom::element v, reader.Member(top, "", "version"));
  ASSIGN_OR_RETURN(uint64_t version, reader.Uint(v, ".version"));
  if (version != 2) {
    return absl::UnimplementedError(absl::StrCat("MDS index ", index.path, " has version ",
                                                 version, "; Zephon reads Streaming's version 2"));
  }
  ASSIGN_OR_RETURN(dom::element s, reader.Member(top, "", "shards"));
  ASSIGN_OR_RETURN(dom::array shards, reader.Array(s, ".shards"));
  size_t i = 0;
  for (dom::element e : shards) {
    ASSIGN_OR_RETURN(MdsShardInfo shard, reader.Shard(e, i++));
    index.samples += shard.samples;
    index.shards.push_back(std::move(shard));
  }
  return index;
}

absl::StatusOr<MdsIndex> OpenMdsIndex(const ShardFile& index_json) {
  if (index_json.size() > kMaxMdsIndexBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MDS index ", index_json.path(), " has ", index_json.size(),
        " bytes, more than the 1 GiB an index.json may have"));
  }
  std::string scratch;
  ASSIGN_OR_RETURN(const std::string_view bytes,
                   index_json.View(0, index_json.size(), &scratch));
  return ParseMdsIndex(index_json.path(), absl::string_view(bytes.data(), bytes.size()));
}

}  // namespace zephon::pipeline::mds

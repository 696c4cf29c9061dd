#include "daemon/pipeline/formats/parquet/column_chunk_reader.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/parquet/codecs.h"
#include "daemon/pipeline/formats/parquet/encodings.h"

namespace zephon::pipeline::parquet {
namespace {

int BitWidth(uint32_t max) {
  int w = 0;
  while (max != 0) {
    ++w;
    max >>= 1;
  }
  return w;
}

// Decodes `n` levels of max `max` from RLE-hybrid `data` into *out and checks each.
absl::Status DecodeLevels(std::string_view data, uint32_t max, size_t n, const char* what,
                          PodVector<uint8_t>* out) {
  out->resize(n);
  absl::Status s = DecodeRleHybrid(data, BitWidth(max), n, out->data());
  if (!s.ok()) return absl::DataLossError(absl::StrCat(what, " levels: ", s.message()));
  for (size_t i = 0; i < n; ++i) {
    if ((*out)[i] > max) {
      return absl::DataLossError(absl::StrCat(what, " level ", (*out)[i], " at entry ", i,
                                              " passes the column's maximum ", max));
    }
  }
  return absl::OkStatus();
}

// v1 levels: a 4-byte little-endian length, then that many RLE-hybrid bytes.
absl::StatusOr<size_t> DecodeV1Levels(std::string_view data, Encoding encoding, uint32_t max,
                                      size_t n, const char* what, PodVector<uint8_t>* out) {
  if (encoding != Encoding::kRle) {
    return absl::UnimplementedError(absl::StrCat(what, " levels in encoding ",
                                                 EncodingName(encoding),
                                                 " (only RLE is supported)"));
  }
  if (data.size() < 4) return absl::DataLossError(absl::StrCat(what, " levels end early"));
  uint32_t len;
  std::memcpy(&len, data.data(), 4);
  if (len > data.size() - 4) {
    return absl::DataLossError(absl::StrCat(what, " levels of ", len,
                                            " bytes pass the page's end"));
  }
  RETURN_IF_ERROR(DecodeLevels(data.substr(4, len), max, n, what, out));
  return 4 + static_cast<size_t>(len);
}

}  // namespace

std::string ColumnChunkReader::Context() const {
  return absl::StrCat(file_.path(), ": row group ", row_group_, ", column '",
                      absl::StrJoin(plan_.path, "."), "', page ", page_index_);
}

absl::Status ColumnChunkReader::Fail(absl::Status status) const {
  return absl::Status(status.code(), absl::StrCat(Context(), ": ", status.message()));
}

absl::StatusOr<std::unique_ptr<ColumnChunkReader>> ColumnChunkReader::Open(
    const ShardFile& file, const ColumnChunk& chunk, int row_group, const ColumnPlan& plan,
    ChunkBuffers* buffers) {
  const std::string where = absl::StrCat(file.path(), ": row group ", row_group, ", column '",
                                         absl::StrJoin(plan.path, "."), "'");
  if (chunk.file_path.has_value()) {
    return absl::UnimplementedError(absl::StrCat(where, ": the column chunk lives in another "
                                                 "file ('", *chunk.file_path,
                                                 "'); rewrite the dataset as self-contained "
                                                 "Parquet files"));
  }
  if (!chunk.meta.has_value()) {
    return absl::DataLossError(absl::StrCat(where, ": the column chunk has no metadata"));
  }
  const ColumnMetaData& meta = *chunk.meta;
  if (meta.path != plan.path) {
    return absl::DataLossError(absl::StrCat(where, ": the column chunk is for '",
                                            absl::StrJoin(meta.path, "."),
                                            "', not the schema's column"));
  }
  if (meta.type != plan.type) {
    return absl::DataLossError(absl::StrCat(where, ": the column chunk's type ",
                                            PhysicalTypeName(meta.type),
                                            " differs from the schema's ",
                                            PhysicalTypeName(plan.type)));
  }
  if (absl::Status s = CheckCodecSupported(meta.codec); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
  }
  int64_t start = meta.data_page_offset;
  if (meta.dictionary_page_offset.has_value() && *meta.dictionary_page_offset > 0 &&
      *meta.dictionary_page_offset < start) {
    start = *meta.dictionary_page_offset;
  }
  const uint64_t size = file.size();
  if (start < 4 || meta.total_compressed_size <= 0 || static_cast<uint64_t>(start) >= size ||
      static_cast<uint64_t>(meta.total_compressed_size) > size - start) {
    return absl::DataLossError(absl::StrCat(where, ": the column chunk's byte range [", start,
                                            ", +", meta.total_compressed_size,
                                            ") passes the file's ", size, " bytes"));
  }
  auto reader = std::unique_ptr<ColumnChunkReader>(
      new ColumnChunkReader(file, row_group, plan, meta, buffers));
  const size_t n = meta.total_compressed_size;
  if (file.data() != nullptr) {
    reader->chunk_ = std::string_view(file.data() + start, n);
  } else {
    RETURN_IF_ERROR(file.ReadAt(start, n, buffers->chunk.Resize(n)));
    reader->chunk_ = buffers->chunk.view();
  }
  return reader;
}

absl::StatusOr<std::string_view> ColumnChunkReader::PageData(const PageHeader& header,
                                                            std::string_view raw, size_t skip,
                                                            ByteBuffer* buffer) {
  // raw[0, skip) is stored uncompressed (data page v2's levels) and is not returned.
  const size_t uncompressed = static_cast<size_t>(header.uncompressed_page_size);
  if (uncompressed > kMaxDecodedPageBytes) {
    return absl::DataLossError(absl::StrCat("page of ", uncompressed,
                                            " bytes uncompressed is over the ",
                                            kMaxDecodedPageBytes, "-byte limit"));
  }
  if (skip > raw.size() || skip > uncompressed) {
    return absl::DataLossError(absl::StrCat("level bytes (", skip, ") pass the page's size"));
  }
  const bool compressed = meta_.codec != Codec::kUncompressed &&
                          !(header.data_page_v2.has_value() && !header.data_page_v2->is_compressed);
  if (!compressed) {
    if (raw.size() != uncompressed) {
      return absl::DataLossError(absl::StrCat("uncompressed page holds ", raw.size(),
                                              " bytes, the page header says ", uncompressed));
    }
    return raw.substr(skip);  // into chunk_, valid for the chunk
  }
  char* out = buffer->Resize(uncompressed - skip);
  RETURN_IF_ERROR(Decompress(meta_.codec, raw.substr(skip), uncompressed - skip, out));
  return buffer->view();
}

absl::Status ColumnChunkReader::ReadDictionary(const PageHeader& header, std::string_view raw) {
  if (has_dictionary_) return absl::DataLossError("a second dictionary page");
  const DictionaryPageHeader& d = *header.dictionary_page;
  if (d.encoding != Encoding::kPlain && d.encoding != Encoding::kPlainDictionary) {
    return absl::UnimplementedError(absl::StrCat("dictionary page in encoding ",
                                                 EncodingName(d.encoding)));
  }
  if (d.num_values < 0) return absl::DataLossError("dictionary page with negative num_values");
  // Views into buffers_.dictionary or chunk_, both kept for the chunk.
  ASSIGN_OR_RETURN(std::string_view data, PageData(header, raw, 0, &buffers_.dictionary));
  if (plan_.type == PhysicalType::kByteArray) {
    RETURN_IF_ERROR(DecodePlainByteArray(data, d.num_values, &dict_strings_));
  } else {
    RETURN_IF_ERROR(DecodePlainInts(data, plan_.type == PhysicalType::kInt32 ? 4 : 8,
                                    d.num_values, &dict_ints_));
  }
  has_dictionary_ = true;
  return absl::OkStatus();
}

absl::Status ColumnChunkReader::DecodeValues(Encoding encoding, std::string_view data,
                                             size_t count, DecodedPage* page) {
  const bool strings = plan_.type == PhysicalType::kByteArray;
  const int width = plan_.type == PhysicalType::kInt32 ? 4 : 8;
  switch (encoding) {
    case Encoding::kPlain:
      return strings ? DecodePlainByteArray(data, count, &page->strings)
                     : DecodePlainInts(data, width, count, &page->ints);
    case Encoding::kPlainDictionary:
    case Encoding::kRleDictionary: {
      if (!has_dictionary_) {
        return absl::DataLossError("dictionary-encoded page without a dictionary page");
      }
      if (count == 0) return absl::OkStatus();
      if (data.empty()) return absl::DataLossError("dictionary indices are missing");
      const int bit_width = static_cast<uint8_t>(data[0]);
      indices_.resize(count);
      absl::Status s = DecodeRleHybrid(data.substr(1), bit_width, count, indices_.data());
      if (!s.ok()) return absl::DataLossError(absl::StrCat("dictionary indices: ", s.message()));
      const size_t dict_size = strings ? dict_strings_.size() : dict_ints_.size();
      for (size_t i = 0; i < count; ++i) {
        if (indices_[i] >= dict_size) {
          return absl::DataLossError(absl::StrCat("dictionary index ", indices_[i],
                                                  " out of range (the dictionary holds ",
                                                  dict_size, " values), value ", i));
        }
      }
      if (strings) {
        page->strings.resize(count);
        for (size_t i = 0; i < count; ++i) page->strings[i] = dict_strings_[indices_[i]];
      } else {
        page->ints.resize(count);
        for (size_t i = 0; i < count; ++i) page->ints[i] = dict_ints_[indices_[i]];
      }
      return absl::OkStatus();
    }
    case Encoding::kDeltaBinaryPacked: {
      if (strings) break;
      size_t consumed = 0;
      RETURN_IF_ERROR(DecodeDeltaBinaryPacked(data, width, count, &page->ints, &consumed));
      if (page->ints.size() != count) {
        return absl::DataLossError(absl::StrCat("DELTA_BINARY_PACKED holds ", page->ints.size(),
                                                " values where the levels say ", count));
      }
      return absl::OkStatus();
    }
    case Encoding::kDeltaLengthByteArray:
      if (!strings) break;
      return DecodeDeltaLengthByteArray(data, count, &page->strings);
    case Encoding::kDeltaByteArray:
      if (!strings) break;
      return DecodeDeltaByteArray(data, count, &buffers_.delta_arena, &page->strings);
    default:
      return absl::UnimplementedError(absl::StrCat("value encoding ", EncodingName(encoding),
                                                   " is not supported"));
  }
  return absl::DataLossError(absl::StrCat("value encoding ", EncodingName(encoding),
                                          " does not apply to ", PhysicalTypeName(plan_.type)));
}

absl::StatusOr<bool> ColumnChunkReader::NextPage(DecodedPage* page) {
  while (pos_ < chunk_.size()) {
    ++page_index_;
    absl::StatusOr<PageHeader> parsed = ParsePageHeader(chunk_.substr(pos_));
    if (!parsed.ok()) {
      return Fail(absl::DataLossError(absl::StrCat("bad page header: ",
                                                   parsed.status().message())));
    }
    const PageHeader& header = *parsed;
    const size_t body = pos_ + header.header_size;
    if (static_cast<uint64_t>(header.compressed_page_size) > chunk_.size() - body) {
      return Fail(absl::DataLossError(absl::StrCat(
          "page of ", header.compressed_page_size, " bytes passes the column chunk's end")));
    }
    const std::string_view raw = chunk_.substr(body, header.compressed_page_size);
    pos_ = body + header.compressed_page_size;
    if (header.crc.has_value() && PageCrc32(raw) != *header.crc) {
      return Fail(absl::DataLossError(absl::StrCat(
          "page CRC mismatch (the header says ", *header.crc, ", the bytes hash to ",
          PageCrc32(raw), "): the file is corrupt")));
    }
    absl::Status s;
    switch (header.type) {
      case PageType::kDictionaryPage:
        if (!header.dictionary_page.has_value()) {
          return Fail(absl::DataLossError("dictionary page without a dictionary page header"));
        }
        s = ReadDictionary(header, raw);
        if (!s.ok()) return Fail(s);
        continue;
      case PageType::kIndexPage:
        continue;
      case PageType::kDataPage:
      case PageType::kDataPageV2:
        break;
      default:
        return Fail(absl::DataLossError(
            absl::StrCat("unknown page type ", static_cast<int>(header.type))));
    }
    page->def.clear();
    page->rep.clear();
    page->strings.clear();
    page->ints.clear();
    const bool v2 = header.type == PageType::kDataPageV2;
    if (v2 ? !header.data_page_v2.has_value() : !header.data_page.has_value()) {
      return Fail(absl::DataLossError("data page without its data page header"));
    }
    const int32_t num_values = v2 ? header.data_page_v2->num_values
                                  : header.data_page->num_values;
    if (num_values < 0 || static_cast<size_t>(num_values) > kMaxPageValues) {
      return Fail(absl::DataLossError(absl::StrCat("page of ", num_values,
                                                   " values (the limit is ", kMaxPageValues,
                                                   ")")));
    }
    const size_t n = num_values;
    page->num_levels = n;
    std::string_view values;
    Encoding encoding;
    if (!v2) {
      const DataPageHeader& d = *header.data_page;
      encoding = d.encoding;
      absl::StatusOr<std::string_view> data = PageData(header, raw, 0, &buffers_.page);
      if (!data.ok()) return Fail(data.status());
      values = *data;
      if (plan_.max_rep > 0) {
        absl::StatusOr<size_t> used = DecodeV1Levels(values, d.repetition_level_encoding,
                                                     plan_.max_rep, n, "repetition", &page->rep);
        if (!used.ok()) return Fail(used.status());
        values.remove_prefix(*used);
      }
      if (plan_.max_def > 0) {
        absl::StatusOr<size_t> used = DecodeV1Levels(values, d.definition_level_encoding,
                                                     plan_.max_def, n, "definition", &page->def);
        if (!used.ok()) return Fail(used.status());
        values.remove_prefix(*used);
      }
    } else {
      const DataPageHeaderV2& d = *header.data_page_v2;
      encoding = d.encoding;
      if (d.repetition_levels_byte_length < 0 || d.definition_levels_byte_length < 0) {
        return Fail(absl::DataLossError("negative level byte lengths"));
      }
      const size_t rep_len = d.repetition_levels_byte_length;
      const size_t def_len = d.definition_levels_byte_length;
      if (rep_len + def_len > raw.size()) {
        return Fail(absl::DataLossError(absl::StrCat(
            "level bytes (", rep_len + def_len, ") pass the page's ", raw.size(), " bytes")));
      }
      absl::StatusOr<std::string_view> data =
          PageData(header, raw, rep_len + def_len, &buffers_.page);
      if (!data.ok()) return Fail(data.status());
      if (plan_.max_rep > 0) {
        s = DecodeLevels(raw.substr(0, rep_len), plan_.max_rep, n, "repetition", &page->rep);
        if (!s.ok()) return Fail(s);
      }
      if (plan_.max_def > 0) {
        s = DecodeLevels(raw.substr(rep_len, def_len), plan_.max_def, n, "definition",
                         &page->def);
        if (!s.ok()) return Fail(s);
      }
      values = *data;
    }
    size_t count = n;
    if (plan_.max_def > 0) {
      count = 0;
      const uint8_t max_def = plan_.max_def;
      for (uint8_t level : page->def) count += level == max_def;
    }
    s = DecodeValues(encoding, values, count, page);
    if (!s.ok()) return Fail(s);
    return true;
  }
  return false;
}

}  // namespace zephon::pipeline::parquet

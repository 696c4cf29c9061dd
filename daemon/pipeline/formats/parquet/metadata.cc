#include "daemon/pipeline/formats/parquet/metadata.h"

#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/parquet/thrift_compact.h"

namespace zephon::pipeline::parquet {
namespace {

using FieldFn = absl::FunctionRef<absl::Status(int16_t id, ThriftType type)>;

// Reads one struct, handing each field to `fn`, which reads it or returns
// Skip(type). Checks that a field's wire type is what the reader expects.
absl::Status ReadStruct(ThriftCompactReader& r, FieldFn fn) {
  RETURN_IF_ERROR(r.BeginStruct());
  int16_t id;
  ThriftType type;
  while (true) {
    ASSIGN_OR_RETURN(bool more, r.ReadFieldHeader(&id, &type));
    if (!more) break;
    RETURN_IF_ERROR(fn(id, type));
  }
  r.EndStruct();
  return absl::OkStatus();
}

absl::Status Expect(ThriftType got, ThriftType want, const char* what) {
  if (got == want) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(what, " has Thrift type ", static_cast<int>(got),
                                          ", expected ", static_cast<int>(want)));
}

absl::Status I32(ThriftCompactReader& r, ThriftType t, const char* what, int32_t* out) {
  RETURN_IF_ERROR(Expect(t, ThriftType::kI32, what));
  ASSIGN_OR_RETURN(*out, r.ReadI32());
  return absl::OkStatus();
}

absl::Status I64(ThriftCompactReader& r, ThriftType t, const char* what, int64_t* out) {
  RETURN_IF_ERROR(Expect(t, ThriftType::kI64, what));
  ASSIGN_OR_RETURN(*out, r.ReadI64());
  return absl::OkStatus();
}

// Reads a list of structs (or other elements) with `element` per element.
absl::Status List(ThriftCompactReader& r, ThriftType t, const char* what, ThriftType want,
                  absl::FunctionRef<absl::Status()> element) {
  RETURN_IF_ERROR(Expect(t, ThriftType::kList, what));
  ThriftType et;
  uint32_t n;
  RETURN_IF_ERROR(r.ReadListHeader(&et, &n));
  RETURN_IF_ERROR(Expect(et, want, what));
  for (uint32_t i = 0; i < n; ++i) RETURN_IF_ERROR(element());
  return absl::OkStatus();
}

absl::Status Missing(const char* what) {
  return absl::DataLossError(absl::StrCat("required field ", what, " is missing"));
}

absl::Status ReadLogicalType(ThriftCompactReader& r, SchemaElement* e) {
  return ReadStruct(r, [&](int16_t id, ThriftType t) -> absl::Status {
    if (id == 2) e->logical_map = true;
    if (id == 3) e->logical_list = true;
    return r.Skip(t);
  });
}

absl::Status ReadSchemaElement(ThriftCompactReader& r, SchemaElement* e) {
  bool has_name = false;
  RETURN_IF_ERROR(ReadStruct(r, [&](int16_t id, ThriftType t) -> absl::Status {
    int32_t v = 0;
    switch (id) {
      case 1:
        RETURN_IF_ERROR(I32(r, t, "SchemaElement.type", &v));
        if (v < 0 || v > 7) return absl::DataLossError(absl::StrCat("unknown physical type ", v));
        e->type = static_cast<PhysicalType>(v);
        return absl::OkStatus();
      case 2:
        return I32(r, t, "SchemaElement.type_length", &e->type_length);
      case 3:
        RETURN_IF_ERROR(I32(r, t, "SchemaElement.repetition_type", &v));
        if (v < 0 || v > 2) return absl::DataLossError(absl::StrCat("unknown repetition ", v));
        e->repetition = static_cast<Repetition>(v);
        return absl::OkStatus();
      case 4: {
        RETURN_IF_ERROR(Expect(t, ThriftType::kBinary, "SchemaElement.name"));
        ASSIGN_OR_RETURN(std::string_view name, r.ReadBinary());
        e->name = std::string(name);
        has_name = true;
        return absl::OkStatus();
      }
      case 5:
        RETURN_IF_ERROR(I32(r, t, "SchemaElement.num_children", &e->num_children));
        if (e->num_children < 0) return absl::DataLossError("negative num_children");
        return absl::OkStatus();
      case 6:
        RETURN_IF_ERROR(I32(r, t, "SchemaElement.converted_type", &v));
        e->converted_type = v;
        return absl::OkStatus();
      case 10:
        RETURN_IF_ERROR(Expect(t, ThriftType::kStruct, "SchemaElement.logicalType"));
        return ReadLogicalType(r, e);
      default:
        return r.Skip(t);
    }
  }));
  if (!has_name) return Missing("SchemaElement.name");
  return absl::OkStatus();
}

absl::Status ReadColumnMetaData(ThriftCompactReader& r, ColumnMetaData* m) {
  bool has_type = false, has_codec = false, has_data_page = false, has_size = false;
  RETURN_IF_ERROR(ReadStruct(r, [&](int16_t id, ThriftType t) -> absl::Status {
    int32_t v = 0;
    switch (id) {
      case 1:
        RETURN_IF_ERROR(I32(r, t, "ColumnMetaData.type", &v));
        if (v < 0 || v > 7) return absl::DataLossError(absl::StrCat("unknown physical type ", v));
        m->type = static_cast<PhysicalType>(v);
        has_type = true;
        return absl::OkStatus();
      case 3:
        return List(r, t, "ColumnMetaData.path_in_schema", ThriftType::kBinary,
                    [&]() -> absl::Status {
                      ASSIGN_OR_RETURN(std::string_view s, r.ReadBinary());
                      m->path.emplace_back(s);
                      return absl::OkStatus();
                    });
      case 4:
        RETURN_IF_ERROR(I32(r, t, "ColumnMetaData.codec", &v));
        m->codec = static_cast<Codec>(v);
        has_codec = true;
        return absl::OkStatus();
      case 5:
        return I64(r, t, "ColumnMetaData.num_values", &m->num_values);
      case 7:
        has_size = true;
        return I64(r, t, "ColumnMetaData.total_compressed_size", &m->total_compressed_size);
      case 9:
        has_data_page = true;
        return I64(r, t, "ColumnMetaData.data_page_offset", &m->data_page_offset);
      case 11: {
        int64_t off = 0;
        RETURN_IF_ERROR(I64(r, t, "ColumnMetaData.dictionary_page_offset", &off));
        m->dictionary_page_offset = off;
        return absl::OkStatus();
      }
      default:
        return r.Skip(t);
    }
  }));
  if (!has_type) return Missing("ColumnMetaData.type");
  if (!has_codec) return Missing("ColumnMetaData.codec");
  if (!has_size) return Missing("ColumnMetaData.total_compressed_size");
  if (!has_data_page) return Missing("ColumnMetaData.data_page_offset");
  return absl::OkStatus();
}

absl::Status ReadColumnChunk(ThriftCompactReader& r, ColumnChunk* c) {
  return ReadStruct(r, [&](int16_t id, ThriftType t) -> absl::Status {
    switch (id) {
      case 1: {
        RETURN_IF_ERROR(Expect(t, ThriftType::kBinary, "ColumnChunk.file_path"));
        ASSIGN_OR_RETURN(std::string_view s, r.ReadBinary());
        c->file_path = std::string(s);
        return absl::OkStatus();
      }
      case 3:
        RETURN_IF_ERROR(Expect(t, ThriftType::kStruct, "ColumnChunk.meta_data"));
        c->meta.emplace();
        return ReadColumnMetaData(r, &*c->meta);
      case 4: {
        int64_t v = 0;
        RETURN_IF_ERROR(I64(r, t, "ColumnChunk.offset_index_offset", &v));
        c->offset_index_offset = v;
        return absl::OkStatus();
      }
      case 5: {
        int32_t v = 0;
        RETURN_IF_ERROR(I32(r, t, "ColumnChunk.offset_index_length", &v));
        c->offset_index_length = v;
        return absl::OkStatus();
      }
      default:
        return r.Skip(t);
    }
  });
}

absl::Status ReadRowGroup(ThriftCompactReader& r, RowGroup* g) {
  bool has_rows = false;
  RETURN_IF_ERROR(ReadStruct(r, [&](int16_t id, ThriftType t) -> absl::Status {
    switch (id) {
      case 1:
        return List(r, t, "RowGroup.columns", ThriftType::kStruct, [&]() {
          return ReadColumnChunk(r, &g->columns.emplace_back());
        });
      case 3:
        has_rows = true;
        return I64(r, t, "RowGroup.num_rows", &g->num_rows);
      default:
        return r.Skip(t);
    }
  }));
  if (!has_rows) return Missing("RowGroup.num_rows");
  if (g->num_rows < 0) return absl::DataLossError("RowGroup.num_rows is negative");
  return absl::OkStatus();
}

absl::Status ReadEncoding(ThriftCompactReader& r, ThriftType t, const char* what,
                          Encoding* out) {
  int32_t v = 0;
  RETURN_IF_ERROR(I32(r, t, what, &v));
  *out = static_cast<Encoding>(v);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FileMetaData> ParseFileMetaData(std::string_view bytes) {
  ThriftCompactReader r(bytes);
  FileMetaData md;
  bool has_rows = false, has_schema = false;
  absl::Status s = ReadStruct(r, [&](int16_t id, ThriftType t) -> absl::Status {
    switch (id) {
      case 2:
        has_schema = true;
        return List(r, t, "FileMetaData.schema", ThriftType::kStruct, [&]() {
          return ReadSchemaElement(r, &md.schema.emplace_back());
        });
      case 3:
        has_rows = true;
        return I64(r, t, "FileMetaData.num_rows", &md.num_rows);
      case 4:
        return List(r, t, "FileMetaData.row_groups", ThriftType::kStruct, [&]() {
          return ReadRowGroup(r, &md.row_groups.emplace_back());
        });
      default:
        return r.Skip(t);
    }
  });
  RETURN_IF_ERROR(s);
  if (!has_schema || md.schema.empty()) return Missing("FileMetaData.schema");
  if (!has_rows) return Missing("FileMetaData.num_rows");
  if (md.num_rows < 0) return absl::DataLossError("FileMetaData.num_rows is negative");
  return md;
}

absl::StatusOr<PageHeader> ParsePageHeader(std::string_view bytes) {
  ThriftCompactReader r(bytes);
  PageHeader h;
  bool has_type = false, has_sizes = false;
  absl::Status s = ReadStruct(r, [&](int16_t id, ThriftType t) -> absl::Status {
    int32_t v = 0;
    switch (id) {
      case 1:
        RETURN_IF_ERROR(I32(r, t, "PageHeader.type", &v));
        h.type = static_cast<PageType>(v);
        has_type = true;
        return absl::OkStatus();
      case 2:
        return I32(r, t, "PageHeader.uncompressed_page_size", &h.uncompressed_page_size);
      case 3:
        has_sizes = true;
        return I32(r, t, "PageHeader.compressed_page_size", &h.compressed_page_size);
      case 4:
        RETURN_IF_ERROR(I32(r, t, "PageHeader.crc", &v));
        h.crc = static_cast<uint32_t>(v);
        return absl::OkStatus();
      case 5:
        RETURN_IF_ERROR(Expect(t, ThriftType::kStruct, "PageHeader.data_page_header"));
        h.data_page.emplace();
        return ReadStruct(r, [&](int16_t fid, ThriftType ft) -> absl::Status {
          DataPageHeader& d = *h.data_page;
          switch (fid) {
            case 1: return I32(r, ft, "DataPageHeader.num_values", &d.num_values);
            case 2: return ReadEncoding(r, ft, "DataPageHeader.encoding", &d.encoding);
            case 3:
              return ReadEncoding(r, ft, "DataPageHeader.definition_level_encoding",
                                  &d.definition_level_encoding);
            case 4:
              return ReadEncoding(r, ft, "DataPageHeader.repetition_level_encoding",
                                  &d.repetition_level_encoding);
            default: return r.Skip(ft);
          }
        });
      case 7:
        RETURN_IF_ERROR(Expect(t, ThriftType::kStruct, "PageHeader.dictionary_page_header"));
        h.dictionary_page.emplace();
        return ReadStruct(r, [&](int16_t fid, ThriftType ft) -> absl::Status {
          DictionaryPageHeader& d = *h.dictionary_page;
          switch (fid) {
            case 1: return I32(r, ft, "DictionaryPageHeader.num_values", &d.num_values);
            case 2: return ReadEncoding(r, ft, "DictionaryPageHeader.encoding", &d.encoding);
            default: return r.Skip(ft);
          }
        });
      case 8:
        RETURN_IF_ERROR(Expect(t, ThriftType::kStruct, "PageHeader.data_page_header_v2"));
        h.data_page_v2.emplace();
        return ReadStruct(r, [&](int16_t fid, ThriftType ft) -> absl::Status {
          DataPageHeaderV2& d = *h.data_page_v2;
          switch (fid) {
            case 1: return I32(r, ft, "DataPageHeaderV2.num_values", &d.num_values);
            case 2: return I32(r, ft, "DataPageHeaderV2.num_nulls", &d.num_nulls);
            case 3: return I32(r, ft, "DataPageHeaderV2.num_rows", &d.num_rows);
            case 4: return ReadEncoding(r, ft, "DataPageHeaderV2.encoding", &d.encoding);
            case 5:
              return I32(r, ft, "DataPageHeaderV2.definition_levels_byte_length",
                         &d.definition_levels_byte_length);
            case 6:
              return I32(r, ft, "DataPageHeaderV2.repetition_levels_byte_length",
                         &d.repetition_levels_byte_length);
            case 7:
              if (ft != ThriftType::kBoolTrue && ft != ThriftType::kBoolFalse) {
                return absl::DataLossError("DataPageHeaderV2.is_compressed is not a bool");
              }
              d.is_compressed = ThriftCompactReader::FieldBool(ft);
              return absl::OkStatus();
            default: return r.Skip(ft);
          }
        });
      default:
        return r.Skip(t);
    }
  });
  RETURN_IF_ERROR(s);
  if (!has_type) return Missing("PageHeader.type");
  if (!has_sizes) return Missing("PageHeader.compressed_page_size");
  if (h.compressed_page_size < 0 || h.uncompressed_page_size < 0) {
    return absl::DataLossError("PageHeader has a negative page size");
  }
  h.header_size = r.position();
  return h;
}

absl::StatusOr<OffsetIndex> ParseOffsetIndex(std::string_view bytes) {
  ThriftCompactReader r(bytes);
  OffsetIndex index;
  RETURN_IF_ERROR(ReadStruct(r, [&](int16_t id, ThriftType t) -> absl::Status {
    if (id != 1) return r.Skip(t);
    return List(r, t, "OffsetIndex.page_locations", ThriftType::kStruct, [&]() {
      PageLocation& p = index.page_locations.emplace_back();
      return ReadStruct(r, [&](int16_t fid, ThriftType ft) -> absl::Status {
        switch (fid) {
          case 1: return I64(r, ft, "PageLocation.offset", &p.offset);
          case 2: return I32(r, ft, "PageLocation.compressed_page_size", &p.compressed_page_size);
          case 3: return I64(r, ft, "PageLocation.first_row_index", &p.first_row_index);
          default: return r.Skip(ft);
        }
      });
    });
  }));
  return index;
}

const char* CodecName(Codec codec) {
  switch (codec) {
    case Codec::kUncompressed: return "UNCOMPRESSED";
    case Codec::kSnappy: return "SNAPPY";
    case Codec::kGzip: return "GZIP";
    case Codec::kLzo: return "LZO";
    case Codec::kBrotli: return "BROTLI";
    case Codec::kLz4: return "LZ4";
    case Codec::kZstd: return "ZSTD";
    case Codec::kLz4Raw: return "LZ4_RAW";
  }
  return "an unknown codec";
}

const char* EncodingName(Encoding encoding) {
  switch (encoding) {
    case Encoding::kPlain: return "PLAIN";
    case Encoding::kPlainDictionary: return "PLAIN_DICTIONARY";
    case Encoding::kRle: return "RLE";
    case Encoding::kBitPacked: return "BIT_PACKED";
    case Encoding::kDeltaBinaryPacked: return "DELTA_BINARY_PACKED";
    case Encoding::kDeltaLengthByteArray: return "DELTA_LENGTH_BYTE_ARRAY";
    case Encoding::kDeltaByteArray: return "DELTA_BYTE_ARRAY";
    case Encoding::kRleDictionary: return "RLE_DICTIONARY";
    case Encoding::kByteStreamSplit: return "BYTE_STREAM_SPLIT";
  }
  return "an unknown encoding";
}

const char* PhysicalTypeName(PhysicalType type) {
  switch (type) {
    case PhysicalType::kBoolean: return "BOOLEAN";
    case PhysicalType::kInt32: return "INT32";
    case PhysicalType::kInt64: return "INT64";
    case PhysicalType::kInt96: return "INT96";
    case PhysicalType::kFloat: return "FLOAT";
    case PhysicalType::kDouble: return "DOUBLE";
    case PhysicalType::kByteArray: return "BYTE_ARRAY";
    case PhysicalType::kFixedLenByteArray: return "FIXED_LEN_BYTE_ARRAY";
  }
  return "an unknown type";
}

}  // namespace zephon::pipeline::parquet

#include "daemon/pipeline/formats/parquet/thrift_compact.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zephon::pipeline::parquet {

absl::StatusOr<uint8_t> ThriftCompactReader::ReadByte() {
  if (pos_ >= bytes_.size()) {
    return absl::DataLossError(
        absl::StrCat("Thrift data ends early (", bytes_.size(), " bytes)"));
  }
  return static_cast<uint8_t>(bytes_[pos_++]);
}

absl::StatusOr<uint64_t> ThriftCompactReader::ReadVarint(int max_bytes) {
  uint64_t value = 0;
  for (int i = 0; i < max_bytes; ++i) {
    ASSIGN_OR_RETURN(uint8_t b, ReadByte());
    value |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
    if ((b & 0x80) == 0) return value;
  }
  return absl::DataLossError(absl::StrCat("Thrift varint longer than ", max_bytes,
                                          " bytes at offset ", pos_));
}

absl::Status ThriftCompactReader::Enter() {
  if (depth_ >= kMaxDepth) {
    return absl::DataLossError(
        absl::StrCat("Thrift structures nest deeper than ", kMaxDepth));
  }
  ++depth_;
  return absl::OkStatus();
}

absl::Status ThriftCompactReader::BeginStruct() {
  RETURN_IF_ERROR(Enter());
  last_id_[depth_] = 0;
  return absl::OkStatus();
}

void ThriftCompactReader::EndStruct() {
  if (depth_ > 0) --depth_;
}

absl::StatusOr<bool> ThriftCompactReader::ReadFieldHeader(int16_t* id, ThriftType* type) {
  ASSIGN_OR_RETURN(uint8_t b, ReadByte());
  if (b == 0) return false;
  const uint8_t t = b & 0x0F;
  if (t > static_cast<uint8_t>(ThriftType::kStruct)) {
    return absl::DataLossError(
        absl::StrCat("Thrift field type ", t, " is not a compact-protocol type"));
  }
  *type = static_cast<ThriftType>(t);
  const uint8_t delta = b >> 4;
  if (delta != 0) {
    *id = static_cast<int16_t>(last_id_[depth_] + delta);
  } else {
    ASSIGN_OR_RETURN(uint64_t z, ReadVarint(3));
    *id = static_cast<int16_t>((z >> 1) ^ (~(z & 1) + 1));
  }
  last_id_[depth_] = *id;
  return true;
}

absl::StatusOr<int32_t> ThriftCompactReader::ReadI32() {
  ASSIGN_OR_RETURN(uint64_t z, ReadVarint(5));
  if (z > 0xFFFFFFFFULL) return absl::DataLossError("Thrift i32 varint overflows 32 bits");
  const uint32_t u = static_cast<uint32_t>(z);
  return static_cast<int32_t>((u >> 1) ^ (~(u & 1) + 1));
}

absl::StatusOr<int64_t> ThriftCompactReader::ReadI64() {
  ASSIGN_OR_RETURN(uint64_t z, ReadVarint(10));
  return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
}

absl::StatusOr<std::string_view> ThriftCompactReader::ReadBinary() {
  ASSIGN_OR_RETURN(uint64_t n, ReadVarint(5));
  if (n > bytes_.size() - pos_) {
    return absl::DataLossError(absl::StrCat("Thrift binary of ", n, " bytes passes the ",
                                            bytes_.size() - pos_, " bytes left"));
  }
  std::string_view out = bytes_.substr(pos_, n);
  pos_ += n;
  return out;
}

absl::Status ThriftCompactReader::ReadListHeader(ThriftType* element, uint32_t* size) {
  ASSIGN_OR_RETURN(uint8_t b, ReadByte());
  uint64_t n = b >> 4;
  if (n == 15) {
    ASSIGN_OR_RETURN(n, ReadVarint(5));
  }
  const uint8_t t = b & 0x0F;
  if (t == 0 || t > static_cast<uint8_t>(ThriftType::kStruct)) {
    return absl::DataLossError(
        absl::StrCat("Thrift list element type ", t, " is not a compact-protocol type"));
  }
  // Every element takes at least one byte, so a count past the bytes left is corrupt
  // (and never becomes a reservation).
  if (n > bytes_.size() - pos_) {
    return absl::DataLossError(absl::StrCat("Thrift list of ", n, " elements passes the ",
                                            bytes_.size() - pos_, " bytes left"));
  }
  *element = static_cast<ThriftType>(t);
  *size = static_cast<uint32_t>(n);
  return absl::OkStatus();
}

absl::Status ThriftCompactReader::SkipElement(ThriftType type) {
  // Bools inside containers are one byte each (not folded into a field header).
  if (type == ThriftType::kBoolTrue || type == ThriftType::kBoolFalse) {
    return ReadByte().status();
  }
  return Skip(type);
}

absl::Status ThriftCompactReader::Skip(ThriftType type) {
  switch (type) {
    case ThriftType::kBoolTrue:
    case ThriftType::kBoolFalse:
      return absl::OkStatus();  // the value was the field header's type
    case ThriftType::kByte:
      return ReadByte().status();
    case ThriftType::kI16:
    case ThriftType::kI32:
    case ThriftType::kI64:
      return ReadVarint(10).status();
    case ThriftType::kDouble:
      if (bytes_.size() - pos_ < 8) return absl::DataLossError("Thrift double ends early");
      pos_ += 8;
      return absl::OkStatus();
    case ThriftType::kBinary:
      return ReadBinary().status();
    case ThriftType::kList:
    case ThriftType::kSet: {
      ThriftType element;
      uint32_t n;
      RETURN_IF_ERROR(ReadListHeader(&element, &n));
      RETURN_IF_ERROR(Enter());
      for (uint32_t i = 0; i < n; ++i) RETURN_IF_ERROR(SkipElement(element));
      --depth_;
      return absl::OkStatus();
    }
    case ThriftType::kMap: {
      ASSIGN_OR_RETURN(uint64_t n, ReadVarint(5));
      if (n == 0) return absl::OkStatus();
      ASSIGN_OR_RETURN(uint8_t kv, ReadByte());
      if (n > bytes_.size() - pos_) return absl::DataLossError("Thrift map passes the bytes left");
      const auto key = static_cast<ThriftType>(kv >> 4);
      const auto value = static_cast<ThriftType>(kv & 0x0F);
      if ((kv >> 4) > 12 || (kv & 0x0F) > 12 || (kv >> 4) == 0 || (kv & 0x0F) == 0) {
        return absl::DataLossError("Thrift map has an invalid key or value type");
      }
      RETURN_IF_ERROR(Enter());
      for (uint64_t i = 0; i < n; ++i) {
        RETURN_IF_ERROR(SkipElement(key));
        RETURN_IF_ERROR(SkipElement(value));
      }
      --depth_;
      return absl::OkStatus();
    }
    case ThriftType::kStruct: {
      RETURN_IF_ERROR(BeginStruct());
      int16_t id;
      ThriftType t;
      while (true) {
        ASSIGN_OR_RETURN(bool more, ReadFieldHeader(&id, &t));
        if (!more) break;
        RETURN_IF_ERROR(Skip(t));
      }
      EndStruct();
      return absl::OkStatus();
    }
    case ThriftType::kStop:
      break;
  }
  return absl::DataLossError("Thrift value of type stop");
}

}  // namespace zephon::pipeline::parquet

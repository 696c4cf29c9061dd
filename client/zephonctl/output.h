// Output helpers shared by zephonctl's commands: aligned text tables for people, and
// JSON (protobuf's printer for messages, a tiny writer for hand-built objects) for
// scripts. Thread-compatible; no shared state.
#ifndef ZEPHON_CLIENT_ZEPHONCTL_OUTPUT_H_
#define ZEPHON_CLIENT_ZEPHONCTL_OUTPUT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "google/protobuf/message.h"

namespace zephon::ctl {

// A text table: a header row and data rows, printed with columns padded to the widest
// cell. Rows shorter than the header are padded with empty cells.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  // Writes every row prefixed by `indent`.
  void Print(std::ostream& out, std::string_view indent = "") const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// A JSON string literal (quotes included) for `text`.
std::string JsonQuote(std::string_view text);

// `message` as JSON with proto field names and default-valued fields included.
std::string ProtoToJson(const google::protobuf::Message& message);

// "1.5 MiB" style sizes.
std::string HumanBytes(uint64_t bytes);

// RFC 3339 UTC time for a Unix time in milliseconds ("-" for 0).
std::string FormatUnixMs(int64_t unix_ms);

}  // namespace zephon::ctl

#endif  // ZEPHON_CLIENT_ZEPHONCTL_OUTPUT_H_

#include "common/run_id.h"

namespace zephon {

bool IsValidRunId(const std::string& run_id) {
  if (run_id.empty() || run_id.size() > 128 || run_id == "." || run_id == "..") return false;
  for (char c : run_id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace zephon

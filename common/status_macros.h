// Status plumbing shared by every module: early-return helpers for absl::Status and
// absl::StatusOr, so fallible code reads top to bottom without nested ifs.
#ifndef ZEPHON_COMMON_STATUS_MACROS_H_
#define ZEPHON_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ZEPHON_CONCAT_INNER_(a, b) a##b
#define ZEPHON_CONCAT_(a, b) ZEPHON_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                     \
  do {                                            \
    const absl::Status zephon_status_ = (expr);   \
    if (!zephon_status_.ok()) return zephon_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` declares x from an OK StatusOr, or returns its
// error from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(ZEPHON_CONCAT_(zephon_statusor_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

#endif  // ZEPHON_COMMON_STATUS_MACROS_H_

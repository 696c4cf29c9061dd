// Run ids: the name a run's ranks share, used as a path component under aggregate_dir.
// Pure function; thread-safe.
#ifndef ZEPHON_COMMON_RUN_ID_H_
#define ZEPHON_COMMON_RUN_ID_H_

#include <string>

namespace zephon {

// True when `run_id` matches [A-Za-z0-9._-]{1,128} and is not "." or ".." (which would
// name aggregate_dir itself or its parent).
bool IsValidRunId(const std::string& run_id);

}  // namespace zephon

#endif  // ZEPHON_COMMON_RUN_ID_H_

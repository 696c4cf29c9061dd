// Named spdlog loggers, one per zephond subsystem, sharing one sink (rule 24).
//
// zephond installs them once ("zephond", "rpc", "instance", "ring", "checkpoint", "peer",
// "metrics"); code asks for its subsystem's logger by name. Unregistered names (unit
// tests, which install nothing) fall back to spdlog's default logger.
//
// Thread-safety: thread-safe (spdlog's registry is).
#ifndef ZEPHON_COMMON_LOGGING_H_
#define ZEPHON_COMMON_LOGGING_H_

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace zephon {

// The subsystems' logger names, in the order InstallLoggers creates them.
inline constexpr const char* kLoggerNames[] = {"zephond", "rpc",  "instance", "ring",
                                               "checkpoint", "peer", "metrics"};

// Creates every logger of kLoggerNames on `sink` at `level`; "zephond" becomes the
// default logger. REQUIRES: called once, before other threads log.
void InstallLoggers(spdlog::sink_ptr sink, spdlog::level::level_enum level);

// The logger named `name`, or the default logger when it is not installed.
std::shared_ptr<spdlog::logger> SubsystemLogger(const char* name);

}  // namespace zephon

#endif  // ZEPHON_COMMON_LOGGING_H_

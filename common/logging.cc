#include "common/logging.h"

namespace zephon {

void InstallLoggers(spdlog::sink_ptr sink, spdlog::level::level_enum level) {
  for (const char* name : kLoggerNames) {
    auto logger = std::make_shared<spdlog::logger>(name, sink);
    logger->set_level(level);
    logger->flush_on(spdlog::level::info);
    if (spdlog::get(name) != nullptr) spdlog::drop(name);
    if (std::string(name) == "zephond") {
      spdlog::set_default_logger(logger);  // also registers it
    } else {
      spdlog::register_logger(logger);
    }
  }
  spdlog::set_level(level);
}

std::shared_ptr<spdlog::logger> SubsystemLogger(const char* name) {
  std::shared_ptr<spdlog::logger> logger = spdlog::get(name);
  return logger != nullptr ? logger : spdlog::default_logger();
}

}  // namespace zephon

// An instance's figures as InstanceStatus fields and explain lines: packing fill,
// ensure_mixture's achieved shares, a curriculum's position and SFT loss masks. The
// figures are counted elsewhere (pipeline::PackStats, MixtureStats, LossMaskTally,
// WorkSource::CurriculumAt); these only present them.
// Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_INSTANCE_FIGURES_H_
#define ZEPHON_DAEMON_INSTANCE_FIGURES_H_

#include <memory>
#include <string>
#include <vector>

#include "daemon/pipeline/batching/lane_stream.h"
#include "daemon/pipeline/batching/loss_mask_figures.h"
#include "daemon/pipeline/batching/mixture_stats.h"
#include "daemon/pipeline/formats/dataset.h"
#include "daemon/pipeline/ordering/work_source.h"
#include "proto/spec.pb.h"
#include "proto/zephon.pb.h"

namespace zephon::daemon {

// Explain prints one line per owned lane up to this many lanes; beyond, a summary, so
// explain stays short for groups owning hundreds of lanes (status and /metrics keep
// every lane).
inline constexpr size_t kFigureLinesPerLane = 8;

// The work source's dataset names, in order.
std::vector<std::string> DatasetNames(const proto::PipelineSpec& spec);

// InstanceStatus.curriculum from where the curriculum stands.
void AddCurriculumStatus(const pipeline::CurriculumPosition& at,
                         const std::vector<std::string>& names, proto::CurriculumStatus* out);

// InstanceStatus.mixture from the lanes' ensure_mixture figures.
void AddMixtureStatus(const std::vector<pipeline::MixtureFigures>& lanes,
                      const std::vector<std::string>& names, proto::InstanceStatus* s);

// Explain's packing lines: "    packing lane <l> (planned so far): records=...
// tokens=... padding_cells=... fill=<tokens / cells, %>", the drop and split counts only
// when there were any; beyond kFigureLinesPerLane lanes, the instance's total
// ("lanes <n>") and its least filled lane.
void AppendPackingLines(const std::vector<pipeline::PackFigures>& lanes, std::string* stages);

// Explain's loss-mask lines (SFT pipelines): each dataset's mask source, then each
// lane's "loss mask lane <l> (written so far): tokens=T masked=M (x%)" (up to
// kFigureLinesPerLane lanes, then their sum).
void AppendLossMaskLines(const proto::PipelineSpec& spec,
                         const std::vector<std::shared_ptr<const pipeline::Dataset>>& datasets,
                         const std::vector<pipeline::LossMaskFigures>& lanes,
                         std::string* stages);

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_INSTANCE_FIGURES_H_

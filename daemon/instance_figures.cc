#include "daemon/instance_figures.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/pipeline/tokenize_spec.h"

namespace zephon::daemon {
namespace {

void AppendPackingLine(const std::string& what, const pipeline::PackFigures& f,
                       std::string* stages) {
  const uint64_t cells = f.tokens + f.padding_cells;
  absl::StrAppend(stages, "    packing ", what, " (planned so far): records=", f.records,
                  " tokens=", f.tokens, " padding_cells=", f.padding_cells, " fill=",
                  cells == 0 ? std::string("-")
                             : absl::StrFormat("%.2f%%", 100.0 * static_cast<double>(f.tokens) /
                                                             static_cast<double>(cells)));
  if (f.dropped_tokens > 0) absl::StrAppend(stages, " dropped_tokens=", f.dropped_tokens);
  if (f.dropped_samples > 0) absl::StrAppend(stages, " dropped_samples=", f.dropped_samples);
  if (f.split_samples > 0) absl::StrAppend(stages, " split_samples=", f.split_samples);
  absl::StrAppend(stages, "\n");
}

}  // namespace

std::vector<std::string> DatasetNames(const proto::PipelineSpec& spec) {
  std::vector<std::string> names;
  for (const auto& d : spec.work_source().datasets()) names.push_back(d.name());
  return names;
}

void AddCurriculumStatus(const pipeline::CurriculumPosition& at,
                         const std::vector<std::string>& names, proto::CurriculumStatus* out) {
  out->set_phase(static_cast<uint32_t>(at.phase));
  out->set_phases(static_cast<uint32_t>(at.phases));
  out->set_phase_start_chunk(at.phase_start_chunk);
  out->set_interpolate(at.linear ? "linear" : "step");
  out->set_chunk(at.chunk);
  for (size_t k = 0; k < at.weights.size(); ++k) {
    proto::DatasetWeight* w = out->add_weights();
    w->set_dataset(k < names.size() ? names[k] : std::to_string(k));
    w->set_weight(at.weights[k]);
  }
}

void AddMixtureStatus(const std::vector<pipeline::MixtureFigures>& lanes,
                      const std::vector<std::string>& names, proto::InstanceStatus* s) {
  for (const pipeline::MixtureFigures& f : lanes) {
    proto::LaneMixtureStatus* m = s->add_mixture();
    m->set_lane(f.lane);
    m->set_weight_by(f.weight_by_tokens ? "tokens" : "samples");
    m->set_groups_over_tolerance(f.groups_over_tolerance);
    for (size_t k = 0; k < f.datasets.size(); ++k) {
      const pipeline::DatasetMixFigures& d = f.datasets[k];
      proto::DatasetMixtureStatus* out = m->add_datasets();
      out->set_dataset(k < names.size() ? names[k] : "");
      out->set_target_share(d.target_share);
      out->set_achieved_share(pipeline::AchievedShare(f, k));
      out->set_samples(d.samples);
      out->set_tokens(d.tokens);
      out->set_dropped_samples(d.dropped_samples);
      out->set_dropped_tokens(d.dropped_tokens);
    }
  }
}

void AppendPackingLines(const std::vector<pipeline::PackFigures>& lanes, std::string* stages) {
  if (lanes.size() <= kFigureLinesPerLane) {
    for (const pipeline::PackFigures& f : lanes) {
      AppendPackingLine(absl::StrCat("lane ", f.lane), f, stages);
    }
    return;
  }
  const pipeline::PackFigures* least = nullptr;
  auto padding_share = [](const pipeline::PackFigures& f) {
    const uint64_t cells = f.tokens + f.padding_cells;
    return cells == 0 ? 0.0 : static_cast<double>(f.padding_cells) / static_cast<double>(cells);
  };
  for (const pipeline::PackFigures& f : lanes) {
    if (least == nullptr || padding_share(f) > padding_share(*least)) least = &f;
  }
  AppendPackingLine(absl::StrCat(lanes.size(), " lanes"), pipeline::SumPackFigures(lanes),
                    stages);
  AppendPackingLine(absl::StrCat("least filled lane ", least->lane), *least, stages);
}

void AppendLossMaskLines(const proto::PipelineSpec& spec,
                         const std::vector<std::shared_ptr<const pipeline::Dataset>>& datasets,
                         const std::vector<pipeline::LossMaskFigures>& lanes,
                         std::string* stages) {
  const proto::TokenizeSpec* tokenize = pipeline::FindTokenize(spec);
  for (int i = 0; i < spec.work_source().datasets_size(); ++i) {
    const proto::DatasetSpec& d = spec.work_source().datasets(i);
    std::string source;
    if (!d.loss_mask_field().empty()) {
      source = absl::StrCat("field '", d.loss_mask_field(), "' (",
                            d.loss_mask_format() == proto::DatasetSpec::SPANS ? "spans" : "values",
                            ")");
    } else if (tokenize != nullptr && tokenize->loss_on_size() > 0) {
      source = absl::StrCat("tokenize loss_on=[", absl::StrJoin(tokenize->loss_on(), ", "),
                            "] of fields=[", absl::StrJoin(tokenize->fields(), ", "), "]");
    } else {
      source = "none (every token trained on)";
    }
    const bool cached = i < static_cast<int>(datasets.size()) && datasets[i]->HasLossMask();
    absl::StrAppend(stages, "    loss mask: dataset '", d.name(), "': ", source,
                    cached ? ", in the token cache (.msk)" : "", "\n");
  }
  if (lanes.size() <= kFigureLinesPerLane) {
    for (const pipeline::LossMaskFigures& f : lanes) {
      absl::StrAppend(stages, "    loss mask lane ", f.lane, " (written so far): ", f.Describe(),
                      "\n");
    }
    return;
  }
  pipeline::LossMaskFigures total;
  for (const pipeline::LossMaskFigures& f : lanes) {
    total.tokens += f.tokens;
    total.masked += f.masked;
  }
  absl::StrAppend(stages, "    loss mask ", lanes.size(), " lanes (written so far): ",
                  total.Describe(), "\n");
}

}  // namespace zephon::daemon

#include "server/core/model_report.h"

#include "server/model/kernels/cpu_features.h"

namespace encoder::core {

std::vector<ModelReport> DescribeModels(const api::ModelCatalog& host,
                                        const ServiceLimits& limits,
                                        const DiagnoseLimits& diagnose) {
  std::vector<ModelReport> out;
  const model::CpuFeatures& cpu = model::DetectCpuFeatures();
  for (const api::ServedModel* m : host.List()) {
    ModelReport r;
    r.model = m;
    r.description = &m->description();
    r.is_default = m->name() == host.default_model();
    r.max_input_tokens = r.description->max_length;
    r.max_extrapolation_tokens = MaxExtrapolationTokens(*m, diagnose);
    r.long_input = DefaultLongInput(*m, limits);
    r.auto_truncate =
        ConfiguredLongInput(*m, limits) == LongInputPolicy::kTruncate;
    r.tasks = r.description->tasks();
    r.accepts_text = m->tokenizer() != nullptr;
    r.cpu_model = cpu.model;
    r.cpu_features = cpu.Names();
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace encoder::core

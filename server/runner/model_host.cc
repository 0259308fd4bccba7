#include "server/runner/model_host.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/diagnostics/diagnostics.h"
#include "server/model/dtype.h"
#include "server/model/kernels/kernel_trace.h"
#include "server/model/kernels/packed_linear.h"
#include "server/model/torch_compat.h"
#include "server/runner/long_input_reach.h"
#include "server/runner/model_load.h"
#include "server/runner/thread_policy.h"
#include "server/tokenizer/byte_tokenizer.h"

namespace encoder::runner {

batching::BatchOptions MergeBatchOptions(
    const batching::BatchOptions& defaults,
    const model::BatchingOverrides& overrides) {
  batching::BatchOptions o = defaults;
  o.max_batch_sequences =
      overrides.max_batch_sequences.value_or(o.max_batch_sequences);
  o.max_batch_tokens = overrides.max_batch_tokens.value_or(o.max_batch_tokens);
  if (overrides.max_queue_delay_us) {
    o.max_queue_delay = absl::Microseconds(*overrides.max_queue_delay_us);
  }
  o.max_queued_sequences =
      overrides.max_queued_sequences.value_or(o.max_queued_sequences);
  o.max_batch_cost_bytes =
      overrides.max_batch_memory_bytes.value_or(o.max_batch_cost_bytes);
  if (overrides.executions)
    o.executions = static_cast<int>(*overrides.executions);
  if (overrides.max_batch_ms) {
    o.max_batch_time = absl::Milliseconds(*overrides.max_batch_ms);
  }
  return o;
}

namespace {

// The length of the probe that times attention statistics: long enough
// that their per-pair work, not a forward's fixed costs, decides its time.
constexpr int64_t kStatisticsProbeLength = 256;

// Resident set size of this process in bytes (0 when unknown).
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages_total = 0, pages_resident = 0;
  if (!(statm >> pages_total >> pages_resident)) return 0;
  return pages_resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

int64_t DeriveBudget(const HostOptions& options) {
  if (options.batch_memory_budget_bytes > 0) {
    return options.batch_memory_budget_bytes;
  }
  const int64_t limit = options.memory_limit_bytes > 0
                            ? options.memory_limit_bytes
                            : batching::DetectMemoryLimit(nullptr);
  const int64_t free_bytes = limit - ResidentBytes() - options.reserved_bytes;
  constexpr int64_t kFloor = int64_t{64} << 20;
  return std::max(kFloor, static_cast<int64_t>(free_bytes * kBudgetFraction));
}

// Models that compute alike share a throughput profile.
std::string ProfileKey(const HostedModel& hosted,
                       const batching::BatchOptions& o) {
  const model::ModelConfig& c = hosted.encoder->config();
  return absl::StrCat(hosted.spec.family, "/", c.d_model, "/", c.num_heads, "/",
                      c.num_layers, "/", c.d_ff, "/",
                      model::PrecisionName(EncoderPrecision(*hosted.encoder)),
                      "/", c.max_length(), "/", o.max_batch_sequences, "/",
                      o.max_batch_tokens, "/", o.max_batch_cost_bytes);
}

absl::StatusOr<batching::BatchProfile> ProfileModel(
    const HostedModel& hosted, const batching::BatchOptions& o,
    absl::Duration budget) {
  batching::BatchProfileOptions p;
  p.budget = budget;
  p.max_length = hosted.encoder->config().max_length();
  p.max_batch_sequences = o.max_batch_sequences;
  p.max_batch_tokens = o.max_batch_tokens;
  p.max_batch_cost_bytes = o.max_batch_cost_bytes;
  p.sequence_cost = hosted.runner->Price(api::EmbedSpec{});
  p.probe_item = [runner = hosted.runner.get()](int64_t index, int64_t length) {
    return ToBatchItem(runner->ProbeSpec(index, length));
  };
  return batching::MeasureBatchProfile(hosted.runner.get(), p);
}

// How many times its priced compute a sequence with attention statistics
// takes on this machine (BatchOptions::compute_scale): the runner prices
// the statistics at a fixed ratio to a forward pass, and their true cost
// depends on the CPU (the vector units, the caches the maps pass through).
// One probe sequence at kStatisticsProbeLength tokens (or the model's
// longest), the fastest of two runs.
absl::StatusOr<double> MeasureStatisticsScale(const HostedModel& hosted,
                                              double work_per_second) {
  const int64_t length =
      std::min(kStatisticsProbeLength, hosted.encoder->config().max_length());
  api::EmbedSpec spec = hosted.runner->ProbeSpec(0, length);
  spec.want_attention_stats = true;
  const batching::SequenceCost compute = hosted.runner->Compute(spec);
  std::vector<batching::BatchItem> probe;
  probe.push_back(ToBatchItem(std::move(spec)));
  probe.back().compute = compute;
  probe.back().compute_class = batching::kStatisticsCompute;
  return batching::MeasureComputeScale(hosted.runner.get(), probe,
                                       work_per_second);
}

// The last component of a path: descriptions never reveal host paths.
std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Fills hosted->desc (no_tokenizer_reason and batch_profile are already
// set) from the loaded model and its effective batching options.
void Describe(const batching::BatchOptions& batching, HostedModel* hosted) {
  const model::ModelSpec& spec = hosted->spec;
  const model::Encoder& encoder = *hosted->encoder;
  api::ModelDescription& d = hosted->desc;
  d.name = spec.name;
  d.family = spec.family;
  d.config = spec.config;
  d.scheme = encoder.scheme().Describe();
  d.reach = model::AnalyzeReach(d.config);
  d.max_length = d.config.max_length();
  d.output_dim = encoder.output_dim();
  d.parameter_count = encoder.parameter_count();
  d.device = encoder.device().str();
  d.dtype = model::DtypeOf(encoder.dtype());
  d.precision = EncoderPrecision(encoder);
  if (!spec.model_dir.empty()) {
    d.weights = BaseName(spec.model_dir);
  } else {
    d.weights = spec.weights_path.empty() ? absl::StrCat("seed:", spec.seed)
                                          : BaseName(spec.weights_path);
  }
  if (hosted->text_tokenizer != nullptr) {
    d.tokenizer_kind = hosted->text_tokenizer->kind();
    d.tokenizer_file = BaseName(spec.tokenizer_path);
  }
  d.prompts = spec.prompts;
  d.default_prompt_name = spec.default_prompt_name;
  d.include_prompt = spec.include_prompt;
  d.strip_text = spec.strip_text.value_or(false);
  d.max_extrapolation_tokens = spec.max_extrapolation_tokens;
  d.long_input = spec.long_input;
  d.batching = batching;
  if (const model::ScoreHead* head = encoder.score_head(); head != nullptr) {
    d.head.labels = head->labels;
    d.head.pooling = head->pooling;
    d.head.activation = head->activation;
    d.head.pad_id = head->pad_id;
  }
  if (encoder.has_token_projection()) {
    d.token_dim = encoder.token_output_dim();
    d.normalize_tokens = encoder.normalize_tokens();
    d.token_skips_first = encoder.token_projection_skips_first();
    // BGE-M3's layout (its ColBERT projection skips CLS) and PyLate's
    // ColBERT models score by their outputs.
    d.colbert = spec.colbert;
    d.late_interaction = d.token_skips_first || d.colbert.has_value();
  }
  if (const model::SparseHead* sparse = encoder.sparse_head();
      sparse != nullptr) {
    d.sparse.vocab = sparse->vocab();
    d.sparse.pooling =
        sparse->pooling == model::SparseHead::Pool::kMax ? "max" : "sum";
    d.sparse.activation = sparse->double_log ? "log1p_relu" : "relu";
    d.sparse.kind = sparse->kind == model::SparseHead::Kind::kTokenWeight
                        ? "token_weight"
                        : "masked_lm";
  }
  d.rerank_template = spec.rerank_template;
  d.type_vocab_size = spec.config.arch.token_type_embedding
                          ? spec.config.arch.type_vocab_size
                          : 0;
}

// The long-input policy auto's measured reach, where the model's policy
// is auto and its scheme can run past its length.
absl::Status MeasureReach(const HostOptions& options, HostedModel* hosted) {
  api::ModelDescription& d = hosted->desc;
  const std::optional<int64_t> limit =
      ReachLimit(d, options.long_input, options.max_extrapolation_tokens,
                 options.long_input_drift);
  if (!limit) return absl::OkStatus();
  absl::StatusOr<api::MeasuredReach> reach = MeasureLongInputReach(
      *hosted->runner, d, *limit, options.long_input_drift);
  if (!reach.ok()) {
    return absl::Status(
        reach.status().code(),
        absl::StrCat("measuring how far model \"", d.name,
                     "\" holds past its length (--long-input auto; "
                     "--long-input-drift 0 skips it): ",
                     reach.status().message()));
  }
  d.measured_reach = *std::move(reach);
  return absl::OkStatus();
}

}  // namespace

batching::SequenceCost HostedModel::Price(const api::EmbedSpec& spec) const {
  return runner->Price(spec);
}

absl::Status HostedModel::Embed(api::EmbedWork work) const {
  if (!work.done) {
    return absl::InvalidArgumentError("Embed has no completion callback");
  }
  auto request = std::make_shared<batching::Request>();
  request->sequences.reserve(work.sequences.size());
  for (api::EmbedSpec& spec : work.sequences) {
    const batching::SequenceCost compute = runner->Compute(spec);
    const batching::ComputeClass compute_class =
        spec.want_attention_stats ? batching::kStatisticsCompute
                                  : batching::kPlainCompute;
    request->sequences.push_back(ToBatchItem(std::move(spec)));
    request->sequences.back().compute = compute;
    request->sequences.back().compute_class = compute_class;
  }
  request->deadline = work.deadline;
  request->is_cancelled = std::move(work.is_cancelled);
  request->traced = work.traced;
  request->done = [done = std::move(work.done)](
                      absl::Status status,
                      std::vector<batching::ItemResult> items) {
    std::vector<api::EmbedResult> results;
    results.reserve(items.size());
    for (batching::ItemResult& item : items) {
      // The encoder runner's outputs; nothing else runs on this batcher.
      api::EmbedResult* r = std::any_cast<api::EmbedResult>(&item.output);
      if (r == nullptr) {
        return done(absl::InternalError("a batch result is not an embedding"),
                    {});
      }
      results.push_back(std::move(*r));
      results.back().batch = item.batch;
    }
    done(std::move(status), std::move(results));
  };
  return batcher->Submit(std::move(request));
}

int64_t HostedModel::queued_sequences() const {
  return batcher->queued_sequences();
}

absl::Status HostedModel::Diagnose(api::DiagnoseWork work) const {
  if (!work.done) {
    return absl::InvalidArgumentError("Diagnose has no completion callback");
  }
  using Report = absl::StatusOr<api::DiagnoseReport>;
  auto report = std::make_shared<Report>(absl::UnknownError("not run"));
  batching::BatchItem item;
  item.length = std::max<int64_t>(
      work.length, static_cast<int64_t>(work.options.token_ids.size()));
  item.cost = work.cost;
  item.run_alone = [model = encoder.get(), report,
                    options = std::move(work.options)] {
    const ThreadShare share(/*counts=*/!model->device().is_cuda());
    return share.Run([&] {
      *report = diagnostics::Diagnose(*model, options);
      return report->status();
    });
  };
  auto request = std::make_shared<batching::Request>();
  request->sequences.push_back(std::move(item));
  request->deadline = work.deadline;
  request->is_cancelled = std::move(work.is_cancelled);
  request->done = [report, done = std::move(work.done)](
                      absl::Status status,
                      std::vector<batching::ItemResult> results) {
    const batching::BatchStats stats =
        results.empty() ? batching::BatchStats{} : results.front().batch;
    if (!status.ok()) return done(std::move(status), stats);
    done(std::move(*report), stats);
  };
  return batcher->Submit(std::move(request));
}

absl::StatusOr<std::unique_ptr<ModelHost>> ModelHost::Create(
    const model::Repository& repository, const HostOptions& options) {
  absl::StatusOr<std::unique_ptr<ModelHost>> host =
      absl::UnknownError("loading did not run");
  RunOnTransientThread([&] { host = Load(repository, options); });
  return host;
}

absl::StatusOr<std::unique_ptr<ModelHost>> ModelHost::Load(
    const model::Repository& repository, const HostOptions& options) {
  std::unique_ptr<ModelHost> host(new ModelHost());
  host->options_ = options;
  host->default_model_ = repository.default_model;
  host->aliases_ = repository.aliases;
  host->strict_names_ = repository.strict_names;
  if (options.device.is_cuda())
    model::SetCudnnAttention(options.cudnn_attention);
  for (const model::ModelSpec& spec : repository.models) {
    auto hosted = std::make_unique<HostedModel>();
    ASSIGN_OR_RETURN(auto encoder, LoadPrecision(spec, options, hosted.get()));
    ASSIGN_OR_RETURN(
        auto tok,
        LoadModelTokenizer(hosted->spec, &hosted->desc.no_tokenizer_reason));
    hosted->text_tokenizer = std::move(tok);
    hosted->encoder = std::move(encoder);
    hosted->runner = std::make_unique<EncoderRunner>(hosted->encoder.get());
    hosted->runner->set_skip_padding_min_share(options.skip_padding_min_share);
    hosted->desc.skip_padding_min_share = options.skip_padding_min_share;
    hosted->runner->set_fused_attention(options.fused_attention);
    hosted->desc.attention_kernel =
        hosted->encoder->bf16_attention() ? api::AttentionKernel::kBfloat16
        : options.fused_attention         ? api::AttentionKernel::kFused
                                          : api::AttentionKernel::kExplicit;
    // Packed when at least one weight is (small ones may all stay plain).
    const bool packed = hosted->encoder->packed_weights() > 0;
    hosted->desc.linear_kernel =
        packed ? api::LinearKernel::kPacked : api::LinearKernel::kPlain;
    model::PackedLimits limits{0, 0};  // plain: none
    if (packed) {
      limits =
          PackedLimitsFor(options, hosted->encoder->dtype()).value_or(limits);
    }
    hosted->desc.packed_max_rows = limits.max_rows;
    hosted->desc.packed_min_elements = limits.min_elements;
    if (options.warm_up) {
      // The warm-up and one 8 x 128-token batch run under the libraries'
      // traces: what they ran is the model's kernels in /info.
      absl::Status s;
      if (options.device.is_cpu()) {
        hosted->desc.kernels = model::TraceKernels(
            [&]() -> absl::Status {
              RETURN_IF_ERROR(hosted->runner->WarmUp());
              return hosted->runner->RunProbeBatch(8, 128);
            },
            &s);
      } else {
        s = hosted->runner->WarmUp();
      }
      if (!s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat("warm-up of model \"", spec.name,
                                         "\": ", s.message()));
      }
      absl::StatusOr<double> rate = hosted->runner->MeasureWorkRate();
      if (!rate.ok()) {
        return absl::Status(rate.status().code(),
                            absl::StrCat("timing model \"", spec.name,
                                         "\": ", rate.status().message()));
      }
      hosted->work_per_second = *rate;
      absl::StatusOr<double> scale = MeasureStatisticsScale(*hosted, *rate);
      if (!scale.ok()) {
        return absl::Status(
            scale.status().code(),
            absl::StrCat("timing attention statistics of "
                         "model \"",
                         spec.name, "\": ", scale.status().message()));
      }
      hosted->compute_scale[batching::kStatisticsCompute] = *scale;
    }
    host->models_.push_back(std::move(hosted));
  }
  // The budget is what remains once every model is loaded and warm.
  host->budget_ =
      std::make_unique<batching::MemoryBudget>(DeriveBudget(options));
  std::map<std::string, batching::BatchProfile> profiles;  // by ProfileKey
  for (auto& hosted : host->models_) {
    batching::BatchOptions o =
        MergeBatchOptions(options.batching, hosted->spec.batching);
    o.memory_budget = host->budget_.get();
    o.work_per_second = hosted->work_per_second;
    o.compute_scale = hosted->compute_scale;
    const int64_t capacity = host->budget_->capacity();
    if (o.max_batch_cost_bytes <= 0 || o.max_batch_cost_bytes > capacity) {
      o.max_batch_cost_bytes = capacity;
    }
    if (options.batch_profile_budget > absl::ZeroDuration()) {
      const std::string key = ProfileKey(*hosted, o);
      auto known = profiles.find(key);
      if (known == profiles.end()) {
        auto measured = ProfileModel(*hosted, o, options.batch_profile_budget);
        if (!measured.ok()) {
          return absl::Status(
              measured.status().code(),
              absl::StrCat("batch profile of model \"", hosted->spec.name,
                           "\": ", measured.status().message()));
        }
        known = profiles.emplace(key, *std::move(measured)).first;
      }
      hosted->desc.batch_profile = known->second;
      o.length_caps = known->second.caps;
    }
    Describe(o, hosted.get());
    RETURN_IF_ERROR(MeasureReach(options, hosted.get()));
    hosted->batcher = std::make_unique<batching::Batcher>(
        hosted->runner.get(), o,
        options.make_observer ? options.make_observer(hosted->spec.name)
                              : batching::BatcherObserver{});
  }
  return host;
}

ModelHost::~ModelHost() {
  // Batchers first: their workers use the runners and encoders.
  for (auto& m : models_) m->batcher.reset();
}

std::vector<const api::ServedModel*> ModelHost::List() const {
  std::vector<const api::ServedModel*> all;
  for (const auto& m : models_) all.push_back(m.get());
  return all;
}

const HostedModel* ModelHost::FindHosted(const std::string& name) const {
  const std::string& want = name.empty() ? default_model_ : name;
  for (const auto& m : models_) {
    if (m->desc.name == want) return m.get();
  }
  if (auto alias = aliases_.find(want); alias != aliases_.end()) {
    for (const auto& m : models_) {
      if (m->desc.name == alias->second) return m.get();
    }
  }
  if (!strict_names_ && models_.size() == 1) return models_[0].get();
  return nullptr;
}

bool ModelHost::DrainAll(absl::Time deadline) {
  bool all = true;
  for (auto& m : models_) all = m->batcher->Drain(deadline) && all;
  return all;
}

}  // namespace encoder::runner

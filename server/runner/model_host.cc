#include "server/runner/model_host.h"

#include "absl/strings/str_cat.h"
#include "server/tokenizer/byte_tokenizer.h"

namespace encoder::runner {

batching::BatchOptions MergeBatchOptions(
    const batching::BatchOptions& defaults,
    const std::map<std::string, int64_t>& overrides) {
  batching::BatchOptions o = defaults;
  for (const auto& [key, value] : overrides) {
    if (key == "max_batch_sequences") o.max_batch_sequences = value;
    if (key == "max_batch_tokens") o.max_batch_tokens = value;
    if (key == "max_queue_delay_us")
      o.max_queue_delay = absl::Microseconds(value);
    if (key == "max_queued_sequences") o.max_queued_sequences = value;
  }
  return o;
}

absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadModelTokenizer(
    const model::ModelSpec& spec) {
  if (spec.tokenizer_path.empty()) {
    return std::unique_ptr<tokenizer::Tokenizer>(
        std::make_unique<tokenizer::ByteTokenizer>(spec.config.vocab_size));
  }
  auto tok = tokenizer::LoadTokenizer(spec.tokenizer_path);
  if (!tok.ok()) {
    return absl::Status(tok.status().code(),
                        absl::StrCat("tokenizer of model \"", spec.name,
                                     "\": ", tok.status().message()));
  }
  if ((*tok)->vocab_size() > spec.config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer of model \"", spec.name, "\" (", spec.tokenizer_path,
        ") has ", (*tok)->vocab_size(),
        " ids, more than the model's vocab_size ", spec.config.vocab_size));
  }
  return tok;
}

absl::StatusOr<std::unique_ptr<ModelHost>> ModelHost::Create(
    const model::Repository& repository, const HostOptions& options) {
  std::unique_ptr<ModelHost> host(new ModelHost());
  host->options_ = options;
  host->default_model_ = repository.default_model;
  for (const model::ModelSpec& spec : repository.models) {
    auto encoder = model::LoadModel(spec, options.device, options.dtype);
    if (!encoder.ok()) return encoder.status();
    auto tok = LoadModelTokenizer(spec);
    if (!tok.ok()) return tok.status();
    auto hosted = std::make_unique<HostedModel>();
    hosted->spec = spec;
    hosted->tokenizer = std::move(tok).value();
    hosted->encoder = std::move(encoder).value();
    hosted->runner = std::make_unique<EncoderRunner>(hosted->encoder.get());
    if (options.warm_up) {
      if (absl::Status s = hosted->runner->WarmUp(); !s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat("warm-up of model \"", spec.name,
                                         "\": ", s.message()));
      }
    }
    hosted->batch_options = MergeBatchOptions(options.batching, spec.batching);
    hosted->batcher = std::make_unique<batching::Batcher>(
        hosted->runner.get(), hosted->batch_options,
        options.make_observer ? options.make_observer(spec.name)
                              : batching::BatcherObserver{});
    host->models_.push_back(std::move(hosted));
  }
  return host;
}

ModelHost::~ModelHost() {
  // Batchers first: their workers use the runners and encoders.
  for (auto& m : models_) m->batcher.reset();
}

const HostedModel* ModelHost::Find(const std::string& name) const {
  const std::string& want = name.empty() ? default_model_ : name;
  for (const auto& m : models_) {
    if (m->spec.name == want) return m.get();
  }
  return nullptr;
}

bool ModelHost::DrainAll(absl::Time deadline) {
  bool all = true;
  for (auto& m : models_) all = m->batcher->Drain(deadline) && all;
  return all;
}

}  // namespace encoder::runner

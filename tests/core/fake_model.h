// A stand-in model behind the model handle (runner/served_model.h): no
// weights, no LibTorch forward pass, answers in microseconds, so that the
// core's every path (admission, limits, the ledger, long-input policies,
// prompts, drain) is tested without a model or a socket.
//
// Its pooled vector says what it was given, so a test can check what the
// core sent: [tokens, sum of ids, first id, last id] (d_model 4). Work
// runs on the model's own thread, as a batcher's would; a closed gate holds
// it queued (to test the drain, deadlines and cancellation).
#ifndef ENCODER_TESTS_CORE_FAKE_MODEL_H_
#define ENCODER_TESTS_CORE_FAKE_MODEL_H_

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/api/served_model.h"
#include "server/tokenizer/byte_tokenizer.h"

namespace encoder::testing {

struct FakeModelOptions {
  std::string name = "fake";
  // A learned table: inputs past max_positions tokens are too long.
  int64_t max_positions = 16;
  int64_t vocab_size = tokenizer::ByteTokenizer::kMinVocab;
  bool tokenizer = true;  // a byte tokenizer; false: token ids only
  std::map<std::string, std::string> prompts;
  std::string default_prompt_name;
  // The repository entry's policy; unset: none.
  std::optional<LongInputPolicy> long_input;
  // Sequences accepted and not started beyond which Embed refuses.
  int64_t max_queued = 1 << 20;
  int64_t bytes_per_token = 0;  // the price of a token
  // The model's share of the batch memory budget; 0: unbounded.
  int64_t max_batch_cost_bytes = 0;
  // > 0: rotary positions scaled to reach this length (no table bounds
  // the input; positional/reach.h's scaled_length) instead of a table.
  int64_t scaled_length = 0;
  // As measured at load for the long-input policy auto (with
  // scaled_length: no table bounds the input).
  std::optional<api::MeasuredReach> measured_reach;
  // Ranks by late interaction, as a BGE-M3 model (ModelDescription::
  // late_interaction): projected token vectors skipping the first token,
  // and, with late_sparse, a token-weight sparse head (Compute says what
  // they hold).
  bool late_interaction = false;
  bool late_sparse = true;
  // A one-logit head on the last token read through this rerank template
  // (an LLM reranker); its logit is the sum of the ids / 1000.
  std::optional<model::RerankTemplate> rerank_template = std::nullopt;
  // A PyLate ColBERT model with this framing (ModelDescription::colbert):
  // late interaction, every token projected (none skipped), normalized.
  std::optional<model::ColbertFraming> colbert = std::nullopt;
};

class FakeModel : public api::ServedModel {
 public:
  static constexpr int64_t kWidth = 4;

  explicit FakeModel(FakeModelOptions options = {})
      : options_(std::move(options)) {
    api::ModelDescription& d = description_;
    d.name = options_.name;
    d.family = "fake";
    d.config.vocab_size = options_.vocab_size;
    d.config.d_model = kWidth;
    d.config.num_heads = 1;
    d.config.num_layers = 1;
    d.config.d_ff = kWidth;
    d.config.max_positions = options_.max_positions;
    d.config.max_input_tokens = 4096;
    d.config.positional.type = model::SchemeType::kLearned;
    d.scheme.name = "learned";
    d.scheme.extrapolates = false;
    d.scheme.max_positions = options_.max_positions;
    // A learned table bounds the input at its rows (positional/reach.h).
    d.reach.trained_length = options_.max_positions;
    d.reach.max_length = options_.max_positions;
    d.max_length = options_.max_positions;
    if (options_.scaled_length > 0) {
      d.scheme.name = "rope";
      d.scheme.extrapolates = true;
      d.reach.max_length = 0;
      d.reach.scaled_length = options_.scaled_length;
      d.reach.scaled_reason = absl::StrCat("its rotary scaling reaches ",
                                           options_.scaled_length, " tokens");
    }
    d.output_dim = kWidth;
    d.device = "cpu";
    d.prompts = options_.prompts;
    d.default_prompt_name = options_.default_prompt_name;
    d.long_input = options_.long_input;
    d.measured_reach = options_.measured_reach;
    d.batching.max_batch_cost_bytes = options_.max_batch_cost_bytes;
    if (options_.late_interaction) {
      d.late_interaction = d.token_skips_first = d.normalize_tokens = true;
      d.token_dim = kWidth;
      if (options_.late_sparse) {
        d.sparse.vocab = options_.vocab_size;
        d.sparse.kind = "token_weight";
      }
    }
    if (options_.colbert.has_value()) {
      d.late_interaction = d.normalize_tokens = true;
      d.token_dim = kWidth;
      d.colbert = options_.colbert;
    }
    if (options_.rerank_template.has_value()) {
      d.rerank_template = options_.rerank_template;
      d.head.labels = {"yes"};
      d.head.pooling = model::Pooling::kLastToken;
    }
    if (options_.tokenizer) {
      tokenizer_ =
          std::make_unique<tokenizer::ByteTokenizer>(options_.vocab_size);
      d.tokenizer_kind = "byte";
    } else {
      d.no_tokenizer_reason = "model fake takes token ids only";
    }
    worker_ = std::thread([this] { Work(); });
  }

  ~FakeModel() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      gate_open_ = true;
    }
    worker_.join();
  }

  const api::ModelDescription& description() const override {
    return description_;
  }
  const tokenizer::Tokenizer* tokenizer() const override {
    return tokenizer_.get();
  }
  batching::SequenceCost Price(const api::EmbedSpec&) const override {
    return {options_.bytes_per_token, 0};
  }

  absl::Status Embed(api::EmbedWork work) const override {
    if (work.sequences.empty() || !work.done) {
      return absl::InvalidArgumentError("no sequences or no done");
    }
    absl::MutexLock lock(&mu_);
    if (draining_) return absl::UnavailableError("model fake is draining");
    if (queued_ + static_cast<int64_t>(work.sequences.size()) >
        options_.max_queued) {
      return absl::ResourceExhaustedError(
          "model fake's queue is full (max_queued)");
    }
    queued_ += static_cast<int64_t>(work.sequences.size());
    ++calls_;
    queue_.push_back(std::move(work));
    return absl::OkStatus();
  }

  int64_t queued_sequences() const override {
    absl::MutexLock lock(&mu_);
    return queued_;
  }

  absl::Status Diagnose(api::DiagnoseWork) const override {
    return absl::UnimplementedError("model fake has no probes");
  }

  // Holds queued work until OpenGate (open at first).
  void CloseGate() {
    absl::MutexLock lock(&mu_);
    gate_open_ = false;
  }
  void OpenGate() {
    absl::MutexLock lock(&mu_);
    gate_open_ = true;
  }
  // Embed calls accepted so far.
  int64_t calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  // The sequences of every call run so far, as the core sent them.
  std::vector<api::EmbedSpec> ran() const {
    absl::MutexLock lock(&mu_);
    return ran_;
  }

  // The catalog's drain: refuse new work, wait for the queue to empty.
  bool Drain(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return queue_.empty() && !running_;
    };
    return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
  }

  // What the fake computes for one sequence; projected tokens skip the
  // first unless `skip_first` is false (a ColBERT model's).
  static api::EmbedResult Compute(const api::EmbedSpec& spec,
                                  bool skip_first = true) {
    api::EmbedResult r;
    const std::vector<int64_t>& ids = spec.token_ids;
    int64_t sum = 0;
    for (int64_t id : ids) sum += id;
    r.pooled = {static_cast<float>(ids.size()), static_cast<float>(sum),
                static_cast<float>(ids.front()),
                static_cast<float>(ids.back())};
    for (const auto& [begin, end] : spec.pool_spans) {
      int64_t span_sum = 0;
      for (int64_t i = begin; i < end; ++i) span_sum += ids[i];
      r.span_pooled.insert(
          r.span_pooled.end(),
          {static_cast<float>(end - begin), static_cast<float>(span_sum),
           static_cast<float>(ids[begin]), static_cast<float>(ids[end - 1])});
    }
    if (spec.want_scores) r.scores = {static_cast<float>(sum) / 1000};
    r.num_tokens = static_cast<int64_t>(ids.size());
    r.dim = kWidth;
    r.pooled_dim = kWidth;
    // Projected tokens (a late-interaction model's): one row per token
    // after the first (or from the first), {id % 7, id % 5 - 2, 1,
    // -(id % 3)} / 8.
    if (spec.want_tokens && spec.project_tokens) {
      for (size_t i = skip_first ? 1 : 0; i < ids.size(); ++i) {
        const int64_t id = ids[i];
        r.tokens.insert(r.tokens.end(), {(id % 7) / 8.0f, (id % 5 - 2) / 8.0f,
                                         1 / 8.0f, -(id % 3) / 8.0f});
      }
    }
    // Sparse: each id after the first once, ascending, weighing id / 100.
    if (spec.want_sparse) {
      std::vector<int64_t> kept(ids.begin() + 1, ids.end());
      std::sort(kept.begin(), kept.end());
      kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
      for (int64_t id : kept) {
        r.sparse_indices.push_back(static_cast<int32_t>(id));
        r.sparse_values.push_back(id / 100.0f);
      }
    }
    return r;
  }

 private:
  void Work() {
    for (;;) {
      api::EmbedWork work;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || (gate_open_ && !queue_.empty());
        };
        mu_.Await(absl::Condition(&ready));
        if (queue_.empty()) return;  // stopping
        work = std::move(queue_.front());
        queue_.pop_front();
        running_ = true;
      }
      absl::Status status;
      std::vector<api::EmbedResult> results;
      if (work.is_cancelled && work.is_cancelled()) {
        status = absl::CancelledError("cancelled before it ran");
      } else if (absl::Now() > work.deadline) {
        status = absl::DeadlineExceededError("deadline passed in the queue");
      } else {
        for (const api::EmbedSpec& spec : work.sequences) {
          results.push_back(Compute(spec, !options_.colbert.has_value()));
        }
      }
      {
        absl::MutexLock lock(&mu_);
        queued_ -= static_cast<int64_t>(work.sequences.size());
        if (status.ok()) {
          ran_.insert(ran_.end(), work.sequences.begin(), work.sequences.end());
        }
      }
      if (!status.ok()) results.clear();
      work.done(status, std::move(results));
      absl::MutexLock lock(&mu_);
      running_ = false;
    }
  }

  const FakeModelOptions options_;
  api::ModelDescription description_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  mutable absl::Mutex mu_;
  mutable std::deque<api::EmbedWork> queue_ ABSL_GUARDED_BY(mu_);
  mutable int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<api::EmbedSpec> ran_ ABSL_GUARDED_BY(mu_);
  bool gate_open_ ABSL_GUARDED_BY(mu_) = true;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

// Fake models by name; the first is the default.
class FakeCatalog : public api::ModelCatalog {
 public:
  explicit FakeCatalog(std::vector<FakeModelOptions> models = {{}}) {
    for (FakeModelOptions& o : models) {
      models_.push_back(std::make_unique<FakeModel>(std::move(o)));
    }
    default_ = models_.front()->name();
  }

  const api::ServedModel* Find(const std::string& name) const override {
    return FindFake(name.empty() ? default_ : name);
  }
  FakeModel* FindFake(const std::string& name) const {
    for (const auto& m : models_) {
      if (m->name() == name) return m.get();
    }
    return nullptr;
  }
  std::vector<const api::ServedModel*> List() const override {
    std::vector<const api::ServedModel*> out;
    for (const auto& m : models_) out.push_back(m.get());
    return out;
  }
  const std::string& default_model() const override { return default_; }
  int64_t batch_memory_budget_bytes() const override { return budget_; }
  void set_batch_memory_budget_bytes(int64_t bytes) { budget_ = bytes; }
  bool DrainAll(absl::Time deadline) override {
    bool drained = true;
    for (const auto& m : models_) drained = m->Drain(deadline) && drained;
    return drained;
  }

 private:
  std::vector<std::unique_ptr<FakeModel>> models_;
  std::string default_;
  int64_t budget_ = int64_t{1} << 30;
};

}  // namespace encoder::testing

#endif  // ENCODER_TESTS_CORE_FAKE_MODEL_H_

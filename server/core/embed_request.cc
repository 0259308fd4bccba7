#include "server/core/embed_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/core/colbert_input.h"
#include "server/core/long_input.h"
#include "server/core/status.h"
#include "server/core/text_input.h"

namespace encoder::core {
namespace {

std::string ModelNames(const api::ModelCatalog& host) {
  std::vector<std::string> names;
  for (const auto& m : host.List()) names.push_back(m->name());
  return absl::StrJoin(names, ", ");
}

// Checks indices are in [0, limit) without repeats.
absl::Status CheckIndices(const std::vector<int64_t>& v, int64_t limit,
                          const char* what, const std::string& model) {
  std::set<int64_t> seen;
  for (int64_t i : v) {
    if (i < 0 || i >= limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attention ", what, " index ", i,
          " is out of range: "
          "model \"",
          model, "\" has ", limit, " ", what, "s [0, ", limit, ")"));
    }
    if (!seen.insert(i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("attention ", what, " index ", i, " is repeated"));
    }
  }
  return absl::OkStatus();
}

// Hidden-state indices 0 .. layers, negative ones counted from the end
// (-1 is `layers`), resolved and checked for range and repeats.
absl::StatusOr<std::vector<int64_t>> ResolveHiddenLayers(
    const std::vector<int64_t>& v, int64_t layers, const std::string& model) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (int64_t i : v) {
    const int64_t resolved = i < 0 ? layers + 1 + i : i;
    if (resolved < 0 || resolved > layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("hidden state index ", i, " is out of range: model \"",
                       model, "\" has ", layers,
                       " layers, so hidden states 0 (the embedding "
                       "output) to ",
                       layers, ", or -", layers + 1, " to -1 from the end"));
    }
    if (!seen.insert(resolved).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("hidden state index ", i, " repeats layer ", resolved));
    }
    out.push_back(resolved);
  }
  return out;
}

std::string LengthLimitReason(const api::ModelDescription& d) {
  const model::ModelConfig& c = d.config;
  if (d.reach.max_length > 0 && d.reach.max_length <= c.max_input_tokens) {
    return absl::StrCat(
        "its learned position table has ", c.max_positions, " positions",
        c.first_position() > 0
            ? absl::StrCat(", numbered from ", c.first_position())
            : "");
  }
  return absl::StrCat("max_input_tokens is ", c.max_input_tokens);
}

}  // namespace

absl::Status CheckCost(const api::EmbedSpec& spec,
                       const api::ServedModel& model, const std::string& what) {
  const int64_t n = static_cast<int64_t>(spec.token_ids.size());
  const int64_t need = spec.cost.At(n);
  const int64_t budget = model.description().batching.max_batch_cost_bytes;
  if (budget <= 0 || need <= budget) return absl::OkStatus();
  constexpr double kMiB = 1 << 20;
  return MarkTooLarge(absl::ResourceExhaustedError(absl::StrFormat(
      "%s (%d tokens) needs about %.1f MiB to run on model \"%s\", over the "
      "batch memory budget of %.1f MiB (--batch-memory-budget-bytes, "
      "derived from --memory-limit-bytes); send a shorter input, or ask for "
      "fewer attention maps or hidden states%s",
      what, n, need / kMiB, model.name(), budget / kMiB,
      spec.want_attention_stats
          ? " (attention statistics keep every layer's maps)"
          : "")));
}

absl::Status CheckAttentionSelection(const std::vector<int64_t>& layers,
                                     const std::vector<int64_t>& heads,
                                     bool average_heads,
                                     const api::ServedModel& model) {
  const model::ModelConfig& config = model.description().config;
  RETURN_IF_ERROR(
      CheckIndices(layers, config.num_layers, "layer", model.name()));
  RETURN_IF_ERROR(CheckIndices(heads, config.num_heads, "head", model.name()));
  if (layers.empty() && (!heads.empty() || average_heads)) {
    return absl::InvalidArgumentError(
        "attention heads or average_heads given without attention layers");
  }
  return absl::OkStatus();
}

std::string UnknownModelMessage(const std::string& requested,
                                const api::ModelCatalog& host) {
  return absl::StrCat("model ", QuoteInput(requested),
                      " not found; available: ", ModelNames(host));
}

namespace {

// int8 / uint8 calibration ranges: only with those types, one finite
// [min, max] per kept dimension.
absl::Status CheckQuantizationRanges(const EmbedQuery& query,
                                     const api::ServedModel& model) {
  if (query.quantization_min.empty() && query.quantization_max.empty()) {
    return absl::OkStatus();
  }
  if (query.packing != EmbedQuery::Packing::kInt8 &&
      query.packing != EmbedQuery::Packing::kUint8) {
    return absl::InvalidArgumentError(
        "quantization ranges apply to the int8 and uint8 embedding types");
  }
  const int64_t kept =
      query.dimensions.value_or(model.description().output_dim);
  if (static_cast<int64_t>(query.quantization_min.size()) != kept ||
      static_cast<int64_t>(query.quantization_max.size()) != kept) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantization ranges have ", query.quantization_min.size(),
                     " min and ", query.quantization_max.size(),
                     " max values; the embeddings keep ", kept, " dimensions"));
  }
  for (int64_t d = 0; d < kept; ++d) {
    const float lo = query.quantization_min[d];
    const float hi = query.quantization_max[d];
    if (!std::isfinite(lo) || !std::isfinite(hi) || hi < lo) {
      return absl::InvalidArgumentError(
          absl::StrCat("quantization range of dimension ", d, " is [", lo, ", ",
                       hi, "]; each must be finite with min <= max"));
    }
  }
  return absl::OkStatus();
}

// A ColBERT model's framing (EmbedQuery::input_type): "query" or
// "document", on such a model only, and needed by its projected token
// embeddings; framed inputs are cut at the framing's lengths, never
// chunked or extrapolated.
absl::Status CheckInputType(const EmbedQuery& query,
                            const api::ServedModel& model) {
  const api::ModelDescription& d = model.description();
  const std::string& type = query.input_type;
  if (type.empty()) {
    if (d.colbert.has_value() && query.project_tokens) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model \"", model.name(),
          "\" is a ColBERT model whose queries and documents are framed "
          "apart: set input_type to \"query\" or \"document\" for its "
          "projected token embeddings"));
    }
    return absl::OkStatus();
  }
  if (!d.colbert.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input_type is a ColBERT model's framing (ModelInfo.colbert); model "
        "\"",
        model.name(), "\" has none"));
  }
  if (type != "query" && type != "document") {
    return absl::InvalidArgumentError(absl::StrCat(
        "input_type is \"query\" or \"document\"; got \"", type, "\""));
  }
  if ((query.long_input.has_value() &&
       *query.long_input != LongInputPolicy::kTruncate) ||
      query.chunk_tokens > 0 || query.return_chunks) {
    return absl::InvalidArgumentError(
        "inputs framed by input_type are cut at the model's query_length or "
        "document_length: they are not chunked or extrapolated");
  }
  return absl::OkStatus();
}

// Projected token embeddings and sparse vectors: the model must serve
// them, with valid options.
absl::Status CheckOutputTasks(const EmbedQuery& query,
                              const api::ServedModel& model) {
  const std::string& name = model.name();
  if (query.project_tokens) {
    const api::ModelDescription& d = model.description();
    // A ColBERT model's projected tokens need its framing (CheckInputType).
    if (!d.serves(api::Task::kMultiVector) && !d.colbert.has_value()) {
      return MarkMissingTask(absl::FailedPreconditionError(absl::StrCat(
          "model \"", name, "\" has no token projection (it serves: ",
          absl::StrJoin(d.tasks(), ", "),
          "); projected token embeddings need a multi-vector model with "
          "token-level Dense or Normalize modules, or BGE-M3's "
          "colbert_linear.pt")));
    }
    if (!query.token_embeddings) {
      return absl::InvalidArgumentError(
          "project_token_embeddings needs return_token_embeddings");
    }
  }
  if (query.sparse.has_value()) {
    const api::ModelDescription& d = model.description();
    if (!d.serves(api::Task::kSparse)) {
      return MarkMissingTask(absl::FailedPreconditionError(absl::StrCat(
          "model \"", name,
          "\" has no sparse head (it serves: ", absl::StrJoin(d.tasks(), ", "),
          "); sparse vectors need a masked-LM (SPLADE) checkpoint or BGE-M3's "
          "sparse_linear.pt")));
    }
    if (query.sparse->top_k < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "top_k is ", query.sparse->top_k, "; it must be 0 (all) or more"));
    }
    if (!std::isfinite(query.sparse->threshold) ||
        query.sparse->threshold < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("threshold is ", query.sparse->threshold,
                       "; it must be a finite value >= 0"));
    }
  }
  return absl::OkStatus();
}

// The checks of a query that do not depend on its inputs: how many there
// are, attention indices, dimensions.
absl::Status CheckQueryOptions(const EmbedQuery& query,
                               const api::ServedModel& model,
                               const ServiceLimits& limits) {
  const std::string& name = model.name();
  const int64_t inputs = static_cast<int64_t>(query.inputs.size());
  if (inputs == 0) {
    return absl::InvalidArgumentError("request has no inputs");
  }
  if (inputs > limits.max_inputs_per_request) {
    return absl::InvalidArgumentError(
        absl::StrCat("request has ", inputs, " inputs; at most ",
                     limits.max_inputs_per_request,
                     " per request (--max-inputs-per-request)"));
  }
  RETURN_IF_ERROR(CheckAttentionSelection(query.attention_layers,
                                          query.attention_heads,
                                          query.average_heads, model));
  RETURN_IF_ERROR(CheckQuantizationRanges(query, model));
  RETURN_IF_ERROR(CheckOutputTasks(query, model));
  RETURN_IF_ERROR(CheckInputType(query, model));
  if (query.dimensions.has_value()) {
    const int64_t width = model.description().output_dim;
    const int64_t d = *query.dimensions;
    if (d < 1 || d > width) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dimensions is ", d, "; model \"", name, "\" has embeddings of ",
          width, " values, so dimensions must be 1 to ", width));
    }
  }
  return absl::OkStatus();
}

// What every input of the query asks for (a spec without token ids).
absl::StatusOr<api::EmbedSpec> SharedSpec(const EmbedQuery& query,
                                          const api::ServedModel& model) {
  const model::ModelConfig& config = model.description().config;
  api::EmbedSpec base;
  base.pooling = query.pooling.value_or(config.pooling);
  base.normalize = query.normalize.value_or(config.normalize);
  base.want_tokens = query.token_embeddings;
  base.project_tokens = query.project_tokens;
  base.attention_layers = query.attention_layers;
  base.attention_heads = query.attention_heads;
  base.average_heads = query.average_heads;
  base.want_attention_stats = query.attention_stats;
  ASSIGN_OR_RETURN(base.hidden_layers,
                   ResolveHiddenLayers(query.hidden_layers, config.num_layers,
                                       model.name()));
  if (base.hidden_layers.empty() && query.pool_hidden) {
    return absl::InvalidArgumentError(
        "hidden_states.pooled given without hidden_states.layers");
  }
  base.pool_hidden = query.pool_hidden;
  if (query.sparse.has_value()) {
    base.want_sparse = true;
    base.sparse_top_k = query.sparse->top_k;
    base.sparse_threshold = query.sparse->threshold;
  }
  return base;
}

// INVALID_ARGUMENT's message for inputs[i] of n tokens past `model`'s
// length, refused (truncate false, or the model's default refuse).
std::string TooLongMessage(int i, const api::ServedModel& model, int64_t n) {
  const api::ModelDescription& d = model.description();
  return absl::StrCat("inputs[", i, "] has ", n, " tokens; model \"",
                      model.name(), "\" accepts at most ", d.max_length, " (",
                      LengthLimitReason(d),
                      "); shorten it, set truncate or chunk it (long_input)");
}

// inputs[i]'s token ids: as sent, or its text (after `prompt`, when
// given) tokenized; checked against the vocabulary and the model's length
// limit (unless keep_long), and cut to it when `truncate` (*dropped: the
// tokens the cut took, else 0).
absl::StatusOr<std::vector<int64_t>> InputIds(const EmbedQuery& query, int i,
                                              const api::ServedModel& model,
                                              const std::string& prompt,
                                              int64_t* dropped, bool truncate,
                                              bool keep_long) {
  const model::ModelConfig& config = model.description().config;
  const std::string& name = model.name();
  const int64_t max_len = model.description().max_length;
  const EmbedInput& input = query.inputs[static_cast<size_t>(i)];
  std::vector<int64_t> ids;
  *dropped = 0;
  switch (input.kind) {
    case EmbedInput::Kind::kTokenIds:
      ids = input.token_ids;
      break;
    case EmbedInput::Kind::kText: {
      const std::string& text = input.text;
      if (text.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("inputs[", i, "] has empty text"));
      }
      const std::string prompted =
          prompt.empty() ? std::string() : prompt + text;
      auto tokens = TokenizeText(model, prompt.empty() ? text : prompted,
                                 query.text_options, truncate, max_len);
      if (!tokens.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("inputs[", i, "]: ", tokens.status().message()));
      }
      ids = std::move(tokens->encoding.ids);
      *dropped = tokens->dropped_tokens;
      break;
    }
    case EmbedInput::Kind::kNone:
      return absl::InvalidArgumentError(
          absl::StrCat("inputs[", i, "] is empty: set token_ids or text"));
  }
  if (ids.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs[", i, "] has no token ids"));
  }
  for (size_t j = 0; j < ids.size(); ++j) {
    if (ids[j] < 0 || ids[j] >= config.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs[", i, "] token ", j, " has id ", ids[j],
                       ", outside the vocabulary [0, ", config.vocab_size,
                       ") of model \"", name, "\""));
    }
  }
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n > max_len && (truncate || !keep_long)) {
    if (!truncate) {
      return absl::InvalidArgumentError(TooLongMessage(i, model, n));
    }
    TruncateIds(model, query.text_options.truncation_side, max_len, &ids);
    *dropped = n - static_cast<int64_t>(ids.size());
  }
  return ids;
}

// What every input of a call shares once its options are checked: the
// spec, the prompt, and the long-input policy named or configured.
struct CallPlan {
  api::EmbedSpec base;
  std::string prompt;
  int64_t prompt_skip = 0;
  int64_t max_len = 0;
  // The policy the request named; unset: the model's default, for the
  // inputs past its length only.
  std::optional<LongInputPolicy> named;
  // The model's configured policy (before auto), refuse when one is named.
  LongInputPolicy configured = LongInputPolicy::kRefuse;
  // The model's default resolved (auto included), once an input needs it.
  std::optional<LongInputDefault> fallback;
  // The model's extrapolation limit, once an input needs it.
  std::optional<absl::StatusOr<int64_t>> extrapolation_limit;

  bool Windowed(LongInputPolicy policy) const {
    return policy == LongInputPolicy::kChunk ||
           policy == LongInputPolicy::kLateChunk;
  }
};

const absl::StatusOr<int64_t>& ExtrapolationLimitOf(
    CallPlan& plan, const api::ServedModel& model,
    const ServiceLimits& limits) {
  if (!plan.extrapolation_limit) {
    plan.extrapolation_limit = ExtrapolationLimit(model, limits);
  }
  return *plan.extrapolation_limit;
}

// Why windows (late: late chunking) cannot serve this call; "" when they
// can.
std::string WindowsUnfit(const CallPlan& plan, bool late) {
  const api::EmbedSpec& base = plan.base;
  if (!plan.prompt.empty()) {
    return "chunked inputs take no prompt: the prompt would be in the "
           "first window only";
  }
  if (base.want_sparse) {
    return "a sparse vector comes from one whole sequence: truncate long "
           "inputs instead of chunking them";
  }
  if (base.want_tokens || !base.attention_layers.empty() ||
      base.want_attention_stats || !base.hidden_layers.empty()) {
    return "chunking (long_input) returns pooled embeddings only: ask for "
           "no token embeddings, attention or hidden states";
  }
  if (late && (base.pooling == model::Pooling::kFirst ||
               base.pooling == model::Pooling::kLastToken)) {
    return absl::StrCat(
        "late chunking pools each window's tokens, and this call pools ",
        model::PoolingName(base.pooling),
        "; ask for mean, max or weighted_mean pooling");
  }
  return "";
}

// The call's spec, prompt and policy; refuses a named policy the call
// cannot have and window options without windows.
absl::StatusOr<CallPlan> PlanCall(const EmbedQuery& query,
                                  const api::ServedModel& model,
                                  const ServiceLimits& limits) {
  CallPlan plan;
  ASSIGN_OR_RETURN(plan.base, SharedSpec(query, model));
  ASSIGN_OR_RETURN(plan.prompt,
                   ResolvePrompt(model, query.prompt_name, query.prompt));
  ASSIGN_OR_RETURN(plan.prompt_skip,
                   PromptPoolSkip(model, plan.prompt, query.text_options));
  plan.max_len = model.description().max_length;
  plan.named = query.long_input;
  if (plan.named == LongInputPolicy::kAuto) {
    return absl::InvalidArgumentError(absl::StrCat(
        "long_input auto is a server default; a request names one of ",
        LongInputPolicyList(/*with_auto=*/false)));
  }
  plan.configured = plan.named.has_value() ? LongInputPolicy::kRefuse
                                           : ConfiguredLongInput(model, limits);
  const bool windowed = plan.named && plan.Windowed(*plan.named);
  if (windowed) {
    const std::string why =
        WindowsUnfit(plan, plan.named == LongInputPolicy::kLateChunk);
    if (!why.empty()) return absl::InvalidArgumentError(why);
  }
  if (!windowed && (query.chunk_tokens != 0 || query.return_chunks)) {
    return absl::InvalidArgumentError(
        "chunk_tokens and return_chunks apply to the chunk and late_chunk "
        "policies (long_input)");
  }
  if (query.chunk_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk_tokens is ", query.chunk_tokens, "; it must be 0 or more"));
  }
  if (plan.named == LongInputPolicy::kExtrapolate) {
    RETURN_IF_ERROR(ExtrapolationLimitOf(plan, model, limits).status());
  }
  return plan;
}

// How inputs[i] of n tokens runs: chunk, late_chunk or extrapolate, or
// truncate for "whole, as InputIds left it". The named policy, else (past
// the model's length) the model's default, auto resolved; an extrapolating
// default chunks what is past its limit when the default says so.
absl::StatusOr<LongInputPolicy> InputTreatment(const EmbedQuery& query, int i,
                                               int64_t n,
                                               const api::ServedModel& model,
                                               const ServiceLimits& limits,
                                               CallPlan& plan) {
  LongInputPolicy t = plan.named.value_or(LongInputPolicy::kTruncate);
  if (!plan.named && n > plan.max_len &&
      plan.configured != LongInputPolicy::kTruncate) {
    if (!plan.fallback) plan.fallback = DefaultLongInput(model, limits);
    t = plan.fallback->policy;
    if (t == LongInputPolicy::kExtrapolate && plan.fallback->chunk_past_limit) {
      const absl::StatusOr<int64_t>& limit =
          ExtrapolationLimitOf(plan, model, limits);
      if (!limit.ok() || n > *limit ||
          (plan.fallback->whole_up_to > 0 && n > plan.fallback->whole_up_to)) {
        t = LongInputPolicy::kChunk;
      }
    }
    if (plan.Windowed(t)) {
      const std::string why =
          WindowsUnfit(plan, t == LongInputPolicy::kLateChunk);
      if (!why.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "inputs[", i, "] has ", n, " tokens, past model \"", model.name(),
            "\"'s ", plan.max_len, "; its long-input default (",
            plan.fallback->reason, ") is ", std::string(LongInputPolicyName(t)),
            ", and ", why, "; or name a policy (long_input)"));
      }
    }
  }
  // Late chunking runs the input whole, as extrapolation does.
  if ((t == LongInputPolicy::kExtrapolate ||
       t == LongInputPolicy::kLateChunk) &&
      n > plan.max_len) {
    const absl::StatusOr<int64_t>& limit =
        ExtrapolationLimitOf(plan, model, limits);
    RETURN_IF_ERROR(limit.status());
    if (n > *limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "inputs[", i, "] has ", n, " tokens; model \"", model.name(),
          "\" runs at most ", *limit,
          " tokens whole (the lowest of its position table's end, its "
          "max_extrapolation_tokens or --max-extrapolation-tokens); chunk "
          "it instead"));
    }
  }
  return t;
}

// Adds inputs[i]'s sequences (the input whole, or its windows), priced,
// and its plan to `p`.
// inputs[i] framed as a ColBERT model's query or document
// (EmbedQuery::input_type): one sequence, cut by the framing.
absl::Status PlanColbertInput(const EmbedQuery& query, int i,
                              const CallPlan& plan, PreparedEmbed& p) {
  const api::ServedModel& model = *p.model;
  const EmbedInput& in = query.inputs[static_cast<size_t>(i)];
  const std::string name = absl::StrCat("inputs[", i, "]");
  if (in.kind != EmbedInput::Kind::kText || in.text.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be non-empty text: input_type frames text"));
  }
  auto framed = FrameColbertText(model, plan.prompt + in.text,
                                 query.input_type == "query",
                                 query.text_options.truncation_side);
  if (!framed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", framed.status().message()));
  }
  PreparedEmbed::Input input;
  input.first = p.sequences.size();
  input.truncated = framed->dropped_tokens > 0;
  input.truncated_tokens = framed->dropped_tokens;
  input.normalize = plan.base.normalize;
  if (query.input_type == "document") input.scored = std::move(framed->scored);
  api::EmbedSpec spec = plan.base;
  spec.token_ids = std::move(framed->spec.token_ids);
  spec.attended_tokens = framed->spec.attended_tokens;
  spec.cost = model.Price(spec);
  RETURN_IF_ERROR(CheckCost(spec, model, name));
  p.total_tokens += static_cast<int64_t>(spec.token_ids.size());
  p.sequences.push_back(std::move(spec));
  p.inputs.push_back(std::move(input));
  return absl::OkStatus();
}

absl::Status PlanInput(const EmbedQuery& query, int i,
                       const ServiceLimits& limits, CallPlan& plan,
                       PreparedEmbed& p) {
  if (!query.input_type.empty()) return PlanColbertInput(query, i, plan, p);
  const api::ServedModel& model = *p.model;
  int64_t dropped = 0;
  const bool truncate = plan.named == LongInputPolicy::kTruncate ||
                        plan.configured == LongInputPolicy::kTruncate;
  const bool keep_long =
      (plan.named && plan.named != LongInputPolicy::kRefuse) ||
      plan.configured != LongInputPolicy::kRefuse;
  ASSIGN_OR_RETURN(
      std::vector<int64_t> ids,
      InputIds(query, i, model, plan.prompt, &dropped, truncate, keep_long));
  const int64_t n = static_cast<int64_t>(ids.size());
  ASSIGN_OR_RETURN(const LongInputPolicy t,
                   InputTreatment(query, i, n, model, limits, plan));
  const bool late = t == LongInputPolicy::kLateChunk;
  std::vector<Window> windows;
  if (late ||
      (t == LongInputPolicy::kChunk &&
       (n > plan.max_len || query.chunk_tokens > 0 || query.return_chunks))) {
    ASSIGN_OR_RETURN(windows, Windows(query, i, model, ids, late, limits));
  }
  PreparedEmbed::Input input;
  input.first = p.sequences.size();
  input.truncated = dropped > 0;
  input.truncated_tokens = dropped;
  input.normalize = plan.base.normalize;
  input.late = late;
  for (const Window& w : windows) input.spans.push_back(w.span);
  // The sequences to run: each chunked window, else the whole input (for
  // late chunking, with every window pooled from it).
  std::vector<std::vector<int64_t>> runs;
  std::vector<std::pair<int64_t, int64_t>> late_spans;
  if (late || windows.empty()) {
    for (const Window& w : windows) {
      late_spans.emplace_back(
          w.whole_begin, w.whole_begin + w.span.token_end - w.span.token_begin);
    }
    runs.push_back(std::move(ids));
  } else {
    for (Window& w : windows) runs.push_back(std::move(w.ids));
  }
  input.count = runs.size();
  const bool text =
      query.inputs[static_cast<size_t>(i)].kind == EmbedInput::Kind::kText;
  for (std::vector<int64_t>& run : runs) {
    api::EmbedSpec spec = plan.base;
    spec.token_ids = std::move(run);
    spec.pool_spans = late_spans;
    // Windows are aggregated first, then normalized.
    if (!input.spans.empty()) spec.normalize = false;
    // At least the last token is pooled, whatever truncation left.
    if (text) {
      spec.pool_skip = std::min<int64_t>(
          plan.prompt_skip, static_cast<int64_t>(spec.token_ids.size()) - 1);
    }
    spec.cost = model.Price(spec);
    RETURN_IF_ERROR(CheckCost(spec, model,
                              input.count > 1
                                  ? absl::StrCat("a window of inputs[", i, "]")
                                  : absl::StrCat("inputs[", i, "]")));
    p.total_tokens += static_cast<int64_t>(spec.token_ids.size());
    p.sequences.push_back(std::move(spec));
  }
  p.inputs.push_back(std::move(input));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<LongInputPolicy>> RequestedLongInput(
    std::optional<bool> truncate, std::optional<LongInputPolicy> policy) {
  if (!policy.has_value()) return TruncatePolicy(truncate);
  if (truncate == true && policy != LongInputPolicy::kTruncate) {
    return absl::InvalidArgumentError(
        "set one way to treat long inputs (long_input): truncate, chunk, "
        "late_chunk or extrapolate");
  }
  return policy;
}

absl::StatusOr<PreparedEmbed> PrepareEmbed(const EmbedQuery& query,
                                           const api::ModelCatalog& host,
                                           const ServiceLimits& limits) {
  PreparedEmbed p;
  p.model = host.Find(query.model);
  if (p.model == nullptr) {
    return absl::NotFoundError(UnknownModelMessage(query.model, host));
  }
  RETURN_IF_ERROR(CheckQueryOptions(query, *p.model, limits));
  p.dimensions = query.dimensions.value_or(0);
  ASSIGN_OR_RETURN(CallPlan plan, PlanCall(query, *p.model, limits));
  p.chunk_max = query.chunk_max;
  p.return_chunks = query.return_chunks;
  p.packing = query.packing;
  p.quantization_min = query.quantization_min;
  p.quantization_max = query.quantization_max;
  for (int i = 0; i < static_cast<int>(query.inputs.size()); ++i) {
    RETURN_IF_ERROR(PlanInput(query, i, limits, plan, p));
  }
  const int64_t bytes = EstimateResponseBytes(p);
  if (bytes > limits.max_send_message_bytes) {
    return MarkTooLarge(absl::ResourceExhaustedError(absl::StrCat(
        "the response would be about ", bytes,
        " bytes, over the send limit of ", limits.max_send_message_bytes,
        " bytes (--max-send-message-bytes); ask for fewer attention layers or "
        "heads, set average_heads, use return_attention_stats instead of "
        "maps, drop token embeddings, ask for fewer or pooled hidden states, "
        "or send fewer or shorter inputs per request")));
  }
  return p;
}

int64_t EstimateResponseBytes(const PreparedEmbed& p) {
  const model::ModelConfig& c = p.model->description().config;
  int64_t bytes = 256;
  for (const api::EmbedSpec& s : p.sequences) {
    const int64_t n = static_cast<int64_t>(s.token_ids.size());
    bytes += 128 + 4 * c.d_model;
    if (s.want_tokens) {
      bytes +=
          4 * n *
          (s.project_tokens ? p.model->description().token_dim : c.d_model);
    }
    const int64_t heads =
        s.average_heads
            ? 1
            : (s.attention_heads.empty()
                   ? c.num_heads
                   : static_cast<int64_t>(s.attention_heads.size()));
    bytes +=
        4 * static_cast<int64_t>(s.attention_layers.size()) * heads * n * n;
    if (s.want_attention_stats) bytes += 80 * c.num_layers * c.num_heads;
    if (s.want_sparse) {
      // An index (a varint of at most 3 bytes below 2^21) and a float per
      // kept entry.
      const int64_t vocab = p.model->description().sparse.vocab;
      const int64_t kept =
          s.sparse_top_k > 0 ? std::min(s.sparse_top_k, vocab) : vocab;
      bytes += 16 + (vocab < (int64_t{1} << 21) ? 7 : 9) * kept;
    }
    bytes += 4 * static_cast<int64_t>(s.hidden_layers.size()) *
             (s.pool_hidden ? 1 : n) * c.d_model;
  }
  if (p.return_chunks) {
    for (const PreparedEmbed::Input& in : p.inputs) {
      bytes += static_cast<int64_t>(in.spans.size()) * (48 + 4 * c.d_model);
    }
  }
  return bytes;
}

std::vector<uint8_t> PackSignBits(const std::vector<float>& values,
                                  bool binary) {
  std::vector<uint8_t> out((values.size() + 7) / 8, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] > 0) out[i / 8] |= static_cast<uint8_t>(0x80u >> (i % 8));
  }
  if (binary) {
    for (uint8_t& b : out) b = static_cast<uint8_t>(b - 128);  // int8 bits
  }
  return out;
}

void QuantizeScalar(bool int8, std::vector<EmbeddedInput>* inputs,
                    std::vector<float>* min, std::vector<float>* max) {
  if (inputs->empty()) return;
  const size_t width = (*inputs)[0].result.pooled.size();
  if (min->empty()) {
    min->assign(width, std::numeric_limits<float>::infinity());
    max->assign(width, -std::numeric_limits<float>::infinity());
    for (const EmbeddedInput& in : *inputs) {
      const std::vector<float>& v = in.result.pooled;
      for (size_t d = 0; d < width; ++d) {
        (*min)[d] = std::min((*min)[d], v[d]);
        (*max)[d] = std::max((*max)[d], v[d]);
      }
    }
  }
  // float32 arithmetic throughout, as numpy computes it on float32
  // vectors: q = clip(floor((v - min) / step), 0, 255), a zero step read
  // as 1, and int8 = q - 128 (sentence-transformers' quantize_embeddings).
  std::vector<float> steps(width);
  for (size_t d = 0; d < width; ++d) {
    steps[d] = ((*max)[d] - (*min)[d]) / 255.0f;
    if (steps[d] == 0.0f) steps[d] = 1.0f;
  }
  for (EmbeddedInput& in : *inputs) {
    std::vector<float>& v = in.result.pooled;
    in.packed.resize(width);
    for (size_t d = 0; d < width; ++d) {
      const float q =
          std::clamp(std::floor((v[d] - (*min)[d]) / steps[d]), 0.0f, 255.0f);
      in.packed[d] = int8
                         ? static_cast<uint8_t>(static_cast<int8_t>(q - 128.0f))
                         : static_cast<uint8_t>(q);
    }
    v.clear();
  }
}

void CutPooled(int64_t dimensions, bool normalize, std::vector<float>* pooled) {
  if (dimensions > 0 && dimensions < static_cast<int64_t>(pooled->size())) {
    pooled->resize(static_cast<size_t>(dimensions));
  }
  if (!normalize) return;
  double squares = 0;
  for (float v : *pooled) squares += static_cast<double>(v) * v;
  if (squares <= 0) return;
  const double scale = 1.0 / std::sqrt(squares);
  for (float& v : *pooled) v = static_cast<float>(v * scale);
}

EmbedAnswer BuildAnswer(std::string request_id, const PreparedEmbed& prepared,
                        std::vector<api::EmbedResult> results,
                        double total_ms) {
  EmbedAnswer answer;
  answer.model = prepared.model->name();
  answer.request_id = std::move(request_id);
  answer.total_tokens = prepared.total_tokens;
  answer.total_ms = total_ms;
  if (!prepared.sequences.empty() && prepared.sequences[0].want_sparse) {
    answer.sparse_vocab = prepared.model->description().sparse.vocab;
  }
  const int64_t heads = prepared.model->description().config.num_heads;
  answer.inputs.reserve(prepared.inputs.size());
  for (const PreparedEmbed::Input& plan : prepared.inputs) {
    const api::EmbedSpec& spec = prepared.sequences[plan.first];
    EmbeddedInput out;
    if (!plan.spans.empty()) {
      JoinWindows(prepared, plan, &results, &out);
    } else {
      out.result = std::move(results[plan.first]);
      // Cut to `dimensions` and normalized again.
      api::EmbedResult& r = out.result;
      if (prepared.dimensions > 0 && prepared.dimensions < r.pooled_dim) {
        CutPooled(prepared.dimensions, plan.normalize, &r.pooled);
        r.pooled_dim = prepared.dimensions;
      }
    }
    api::EmbedResult& r = out.result;
    // A ColBERT document's skiplist tokens have no row.
    if (!plan.scored.empty()) KeepScoredRows(plan.scored, r.dim, &r.tokens);
    out.truncated = plan.truncated;
    out.truncated_tokens = plan.truncated_tokens;
    answer.truncated_tokens += plan.truncated_tokens;
    out.packing = prepared.packing;
    if (prepared.packing == EmbedQuery::Packing::kBinary ||
        prepared.packing == EmbedQuery::Packing::kUbinary) {
      out.packed = PackSignBits(
          r.pooled, prepared.packing == EmbedQuery::Packing::kBinary);
      r.pooled.clear();
    }
    if (!r.attention_shape.empty()) {
      out.attention_layers = spec.attention_layers;
      if (!spec.average_heads) {
        if (spec.attention_heads.empty()) {
          for (int64_t h = 0; h < heads; ++h) out.attention_heads.push_back(h);
        } else {
          out.attention_heads = spec.attention_heads;
        }
      }
    }
    if (!r.hidden_shape.empty()) out.hidden_layers = spec.hidden_layers;
    answer.queue_ms = std::max(answer.queue_ms, r.batch.queue_seconds * 1e3);
    answer.inference_ms =
        std::max(answer.inference_ms, r.batch.inference_seconds * 1e3);
    answer.inputs.push_back(std::move(out));
  }
  if (prepared.packing == EmbedQuery::Packing::kInt8 ||
      prepared.packing == EmbedQuery::Packing::kUint8) {
    answer.quantization_min = prepared.quantization_min;
    answer.quantization_max = prepared.quantization_max;
    QuantizeScalar(prepared.packing == EmbedQuery::Packing::kInt8,
                   &answer.inputs, &answer.quantization_min,
                   &answer.quantization_max);
  }
  return answer;
}

}  // namespace encoder::core

#include "server/core/score_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/core/colbert_input.h"
#include "server/core/long_input.h"
#include "server/core/status.h"
#include "server/core/text_input.h"

namespace encoder::core {
namespace {

// FAILED_PRECONDITION unless `model` serves `task`.
absl::Status CheckTask(const api::ServedModel& model, ScoreQuery::Task task) {
  const api::ModelDescription& d = model.description();
  const std::string tasks = absl::StrJoin(d.tasks(), ", ");
  const bool late = task == ScoreQuery::Task::kRerank && d.late_interaction;
  if (!late && !d.serves(api::Task::kClassify)) {
    return MarkMissingTask(absl::FailedPreconditionError(absl::StrCat(
        "model \"", model.name(), "\" has no classification head (it serves: ",
        tasks, "); ", task == ScoreQuery::Task::kRerank ? "rerank" : "classify",
        " needs a sequence classification checkpoint")));
  }
  if (task == ScoreQuery::Task::kRerank && !d.serves(api::Task::kRerank)) {
    return MarkMissingTask(absl::FailedPreconditionError(
        absl::StrCat("model \"", model.name(), "\" has ", d.head.labels.size(),
                     " labels (it serves: ", tasks,
                     "); rerank needs a cross-encoder with one output")));
  }
  if (model.tokenizer() == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("model \"", model.name(), "\" has no tokenizer (",
                     d.no_tokenizer_reason, "); scoring takes text"));
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT for an instruction on a model or task without a rerank
// template, and for positional probes on a templated rerank (its sequence
// is not a pair of texts to swap).
absl::Status CheckTemplate(const ScoreQuery& query,
                           const api::ServedModel& model) {
  const bool templated = query.task == ScoreQuery::Task::kRerank &&
                         model.description().rerank_template.has_value();
  if (query.instruction.has_value() && !templated) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model \"", model.name(),
        "\" has no rerank template; an instruction is for rerank on a model "
        "that has one (ModelInfo.rerank_template)"));
  }
  if (templated && query.positional_probes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model \"", model.name(),
        "\" reranks through its rerank template, whose sequence is not a "
        "pair of texts: positional probes are not served for it"));
  }
  return absl::OkStatus();
}

// The late-interaction weights a rerank on `d` scores with; unset
// without late interaction.
absl::StatusOr<std::optional<ScoreQuery::LateWeights>> LateWeightsFor(
    const ScoreQuery& query, const api::ServedModel& model) {
  const api::ModelDescription& d = model.description();
  if (query.task != ScoreQuery::Task::kRerank || !d.late_interaction) {
    if (query.late_weights.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model \"", model.name(),
          "\" does not rank by late interaction; weights are for models "
          "that do (BGE-M3: ModelInfo.late_interaction)"));
    }
    return std::nullopt;
  }
  if (d.colbert.has_value()) {
    if (query.late_weights.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model \"", model.name(),
          "\" is a ColBERT model scored by its token vectors alone; weights "
          "are for BGE-M3's dense, sparse and ColBERT scores"));
    }
    return ScoreQuery::LateWeights{0, 0, 1};
  }
  const bool sparse = d.serves(api::Task::kSparse);
  const ScoreQuery::LateWeights w = query.late_weights.value_or(
      ScoreQuery::LateWeights{1, sparse ? 1.0f : 0.0f, 1});
  for (float v : {w.dense, w.sparse, w.colbert}) {
    if (!std::isfinite(v) || v < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "late-interaction weights must be finite and >= 0; got dense ",
          w.dense, ", sparse ", w.sparse, ", colbert ", w.colbert));
    }
  }
  if (w.dense + w.sparse + w.colbert <= 0) {
    return absl::InvalidArgumentError(
        "late-interaction weights are all 0; give one a positive weight");
  }
  if (w.sparse > 0 && !sparse) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model \"", model.name(), "\" has no sparse head (it serves: ",
        absl::StrJoin(d.tasks(), ", "), "); set the sparse weight to 0"));
  }
  return w;
}

// What a sequence of a late-interaction rerank asks for: the pooled
// vector as the model pools it, the projected token vectors, and the
// sparse vector when it is weighed.
void AskLateOutputs(const api::ModelDescription& d,
                    const ScoreQuery::LateWeights& w, api::EmbedSpec* spec) {
  spec->pooling = d.config.pooling;
  spec->normalize = d.config.normalize;
  spec->want_scores = false;
  spec->want_tokens = true;
  spec->project_tokens = true;
  spec->want_sparse = w.sparse > 0;
}

// The tokens an explanation names: a pair's two texts' positions and
// tokens (special tokens left out), or for late interaction every token
// after the first, as projected.
void FillSides(const tokenizer::Encoding& e, bool late,
               PreparedScore::Sides* sides) {
  if (late) {
    for (size_t k = 1; k < e.tokens.size(); ++k) {
      sides->second_tokens.push_back(e.tokens[k]);
    }
    return;
  }
  for (size_t k = 0; k < e.sequence_ids.size(); ++k) {
    if (e.sequence_ids[k] < 0) continue;
    const bool first = e.sequence_ids[k] == 0;
    (first ? sides->first : sides->second).push_back(static_cast<int64_t>(k));
    (first ? sides->first_tokens : sides->second_tokens)
        .push_back(k < e.tokens.size() ? e.tokens[k] : "");
  }
}

// The document's tokens in a templated sequence, as an explanation names
// them: the body's tokens (after `offset` prefix tokens) whose bytes
// overlap the document's [begin, end) in the body, special tokens left
// out; the rows are the last position's, which the answer is read from.
void FillTemplateSides(const tokenizer::Encoding& body, size_t offset,
                       int64_t begin, int64_t end, size_t total,
                       const std::string& last_token,
                       PreparedScore::Sides* sides) {
  sides->first = {static_cast<int64_t>(total) - 1};
  sides->first_tokens = {last_token};
  for (size_t k = 0; k < body.size() && k < body.byte_offsets.size(); ++k) {
    const tokenizer::Offsets& o = body.byte_offsets[k];
    const bool special =
        k < body.special_tokens_mask.size() && body.special_tokens_mask[k];
    if (special || o.end <= begin || o.start >= end) continue;
    sides->second.push_back(static_cast<int64_t>(offset + k));
    sides->second_tokens.push_back(k < body.tokens.size() ? body.tokens[k]
                                                          : "");
  }
}

// A rerank pair through the model's rerank template: the prefix and
// suffix without special tokens, the body with the tokenizer's own and
// cut (on the request's side) so that the whole fits `max_len`. With
// `sides`, the answer position and the document's tokens.
absl::StatusOr<TokenizedText> TokenizeTemplate(const ScoreQuery& query,
                                               const ScoreItem& item,
                                               const api::ServedModel& model,
                                               const TextOptions& options,
                                               bool truncate, int64_t max_len,
                                               PreparedScore::Sides* sides) {
  const model::RerankTemplate& t = *model.description().rerank_template;
  tokenizer::EncodeOptions plain;
  plain.file_settings = false;
  plain.add_special_tokens = false;
  ASSIGN_OR_RETURN(auto prefix, model.tokenizer()->Encode(t.prefix, plain));
  ASSIGN_OR_RETURN(auto suffix, model.tokenizer()->Encode(t.suffix, plain));
  const int64_t frame = static_cast<int64_t>(prefix.size() + suffix.size());
  const std::string instruction = query.instruction.value_or(t.instruction);
  const std::string document = item.pair.value_or("");
  const std::string body =
      model::FormatRerankBody(t, instruction, item.text, document);
  ASSIGN_OR_RETURN(auto out,
                   TokenizeText(model, body, options, truncate,
                                std::max<int64_t>(1, max_len - frame)));
  tokenizer::Encoding joined;
  for (const tokenizer::Encoding* e : {&prefix, &out.encoding, &suffix}) {
    joined.ids.insert(joined.ids.end(), e->ids.begin(), e->ids.end());
    joined.tokens.insert(joined.tokens.end(), e->tokens.begin(),
                         e->tokens.end());
    joined.special_tokens_mask.insert(joined.special_tokens_mask.end(),
                                      e->special_tokens_mask.begin(),
                                      e->special_tokens_mask.end());
  }
  joined.type_ids.assign(joined.ids.size(), 0);
  if (sides != nullptr && !joined.tokens.empty()) {
    // The document's bytes in the body: what the body formats to before
    // its {document}.
    model::RerankTemplate head;
    head.body = t.body.substr(0, t.body.find("{document}"));
    const int64_t begin = static_cast<int64_t>(
        model::FormatRerankBody(head, instruction, item.text, document).size());
    FillTemplateSides(out.encoding, prefix.size(), begin,
                      begin + static_cast<int64_t>(document.size()),
                      joined.ids.size(), joined.tokens.back(), sides);
  }
  out.encoding = std::move(joined);
  return out;
}

// `item` (named `name` in messages) tokenized, cut to the model's length
// when `truncate` (*dropped: the tokens the cut took), checked and priced;
// its sides when `sides` is given, with the query's attention maps asked
// for when `explain`; the outputs of late interaction when `late`.
absl::StatusOr<api::EmbedSpec> ItemSpec(
    const ScoreQuery& query, const ScoreItem& item, const std::string& name,
    const api::ServedModel& model, bool truncate, int64_t* dropped,
    PreparedScore::Sides* sides, bool explain,
    const ScoreQuery::LateWeights* late = nullptr) {
  const api::ModelDescription& d = model.description();
  if (item.text.empty() || (item.pair.has_value() && item.pair->empty())) {
    return absl::InvalidArgumentError(absl::StrCat(name, " has empty text"));
  }
  TextOptions options;
  options.truncation_side = query.truncation_side;
  const int64_t max_len = d.max_length;
  const bool templated = query.task == ScoreQuery::Task::kRerank &&
                         d.rerank_template.has_value() && item.pair.has_value();
  auto tokens =
      templated ? TokenizeTemplate(query, item, model, options, truncate,
                                   max_len, sides)
      : item.pair.has_value()
          ? TokenizePair(model, item.text, *item.pair, options, truncate,
                         max_len)
          : TokenizeText(model, item.text, options, truncate, max_len);
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", tokens.status().message()));
  }
  const int64_t n = static_cast<int64_t>(tokens->encoding.size());
  if (n > max_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, item.pair.has_value() ? " with its pair" : "", " has ", n,
        " tokens; model \"", model.name(), "\" accepts at most ", max_len,
        "; shorten it or set truncate"));
  }
  for (int64_t id : tokens->encoding.ids) {
    if (id < 0 || id >= d.config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " has token id ", id, ", outside the vocabulary [0, ",
          d.config.vocab_size, ")"));
    }
  }
  // A causal model's last-token head scores the last token that is not
  // the pad id (transformers' rule): trailing pad ids are dropped, which
  // leaves every earlier state as it is under a causal mask.
  std::vector<int64_t>& ids = tokens->encoding.ids;
  if (d.head.pad_id >= 0 && d.config.arch.causal &&
      d.head.pooling == model::Pooling::kLastToken) {
    size_t keep = ids.size();
    while (keep > 1 && ids[keep - 1] == d.head.pad_id) --keep;
    if (keep < ids.size()) {
      tokens->encoding.KeepWindow(0, keep);
    }
  }
  api::EmbedSpec spec;
  if (sides != nullptr && !templated) {
    FillSides(tokens->encoding, late != nullptr, sides);
  }
  if (explain) {
    spec.attention_layers = query.attention_layers;
    spec.attention_heads = query.attention_heads;
    spec.average_heads = query.average_heads;
  }
  spec.token_ids = std::move(tokens->encoding.ids);
  // Type ids reach only a model with a table of several types (BERT);
  // RoBERTa-style models take 0 for both texts, as transformers feeds them.
  if (item.pair.has_value() && !templated && d.type_vocab_size > 1) {
    spec.type_ids = std::move(tokens->encoding.type_ids);
    for (int64_t& t : spec.type_ids) {
      t = std::clamp<int64_t>(t, 0, d.type_vocab_size - 1);
    }
  }
  spec.pooling = d.head.pooling;
  spec.want_scores = true;
  if (late != nullptr) AskLateOutputs(d, *late, &spec);
  spec.cost = model.Price(spec);
  RETURN_IF_ERROR(CheckCost(spec, model, name));
  *dropped = tokens->dropped_tokens;
  return spec;
}

// INVALID_ARGUMENT for no items or more than max_inputs_per_request.
absl::Status CheckItemCount(const ScoreQuery& query,
                            const ServiceLimits& limits) {
  const int64_t n = static_cast<int64_t>(query.items.size());
  if (n == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("request has no ", query.item_field));
  }
  if (n > limits.max_inputs_per_request) {
    return absl::InvalidArgumentError(
        absl::StrCat("request has ", n, " ", query.item_field, "; at most ",
                     limits.max_inputs_per_request,
                     " per request (--max-inputs-per-request)"));
  }
  return absl::OkStatus();
}

// A ColBERT model's query or document (`name` in messages) framed as
// PyLate frames it, checked and priced; its token names into `names` when
// explained.
absl::StatusOr<api::EmbedSpec> ColbertItemSpec(
    const ScoreQuery& query, const std::string& text, bool is_query,
    const std::string& name, PreparedScore* p,
    std::vector<std::string>* names) {
  const api::ServedModel& model = *p->model;
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " has empty text"));
  }
  auto framed = FrameColbertText(model, text, is_query, query.truncation_side);
  if (!framed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", framed.status().message()));
  }
  api::EmbedSpec spec = std::move(framed->spec);
  AskLateOutputs(model.description(), p->weights, &spec);
  spec.cost = model.Price(spec);
  RETURN_IF_ERROR(CheckCost(spec, model, name));
  p->total_tokens += static_cast<int64_t>(spec.token_ids.size());
  if (names != nullptr) {
    for (size_t k = 0; k < framed->names.size(); ++k) {
      if (framed->scored[k]) names->push_back(framed->names[k]);
    }
  }
  if (!is_query) {
    p->truncated_tokens[p->scored_rows.size()] = framed->dropped_tokens;
    p->scored_rows.push_back(std::move(framed->scored));
  }
  return spec;
}

// A ColBERT model's rerank sequences: each document alone, then the query
// (PreparedScore::colbert).
absl::Status PrepareColbert(const ScoreQuery& query, PreparedScore* p) {
  const bool explain = !query.attention_layers.empty();
  if (explain) p->sides.resize(query.items.size());
  p->colbert = true;
  for (size_t i = 0; i < query.items.size(); ++i) {
    const ScoreItem& item = query.items[i];
    ASSIGN_OR_RETURN(
        auto spec,
        ColbertItemSpec(query, item.pair.value_or(item.text), false,
                        absl::StrCat(query.item_field, "[", i, "]"), p,
                        explain ? &p->sides[i].second_tokens : nullptr));
    p->sequences.push_back(std::move(spec));
  }
  std::vector<std::string> query_names;
  ASSIGN_OR_RETURN(auto spec,
                   ColbertItemSpec(query, query.items[0].text, true, "query", p,
                                   explain ? &query_names : nullptr));
  for (PreparedScore::Sides& sides : p->sides) sides.first_tokens = query_names;
  p->sequences.push_back(std::move(spec));
  return absl::OkStatus();
}

// A late-interaction rerank's sequences: each document alone, then the
// query.
absl::Status PrepareLate(const ScoreQuery& query, bool truncate,
                         PreparedScore* p) {
  if (p->model->description().colbert.has_value()) {
    return PrepareColbert(query, p);
  }
  const bool explain = !query.attention_layers.empty();
  if (explain) p->sides.resize(query.items.size());
  for (size_t i = 0; i < query.items.size(); ++i) {
    const ScoreItem& item = query.items[i];
    const std::string name = absl::StrCat(query.item_field, "[", i, "]");
    int64_t dropped = 0;
    ASSIGN_OR_RETURN(
        auto spec,
        ItemSpec(query, ScoreItem{item.pair.value_or(item.text), std::nullopt},
                 name, *p->model, truncate, &dropped,
                 explain ? &p->sides[i] : nullptr, false, &p->weights));
    p->truncated_tokens[i] = dropped;
    p->total_tokens += static_cast<int64_t>(spec.token_ids.size());
    p->sequences.push_back(std::move(spec));
  }
  int64_t dropped = 0;
  PreparedScore::Sides query_sides;
  ASSIGN_OR_RETURN(
      auto spec,
      ItemSpec(query, ScoreItem{query.items[0].text, std::nullopt}, "query",
               *p->model, truncate, &dropped, explain ? &query_sides : nullptr,
               false, &p->weights));
  for (PreparedScore::Sides& sides : p->sides) {
    sides.first_tokens = query_sides.second_tokens;
  }
  p->total_tokens += static_cast<int64_t>(spec.token_ids.size());
  p->sequences.push_back(std::move(spec));
  return absl::OkStatus();
}

// FlagEmbedding's compute_score of a document `d` against the query `q`
// from their outputs (ScoreQuery::LateWeights); with `similarity`, also
// every query token vector's product with every document token vector
// [query rows, document rows].
float LateScore(const api::EmbedResult& q, const api::EmbedResult& d,
                const ScoreQuery::LateWeights& w, bool sum,
                std::vector<float>* similarity = nullptr) {
  double dense = 0;
  for (size_t k = 0; k < q.pooled.size() && k < d.pooled.size(); ++k) {
    dense += double{q.pooled[k]} * d.pooled[k];
  }
  double sparse = 0;
  for (size_t a = 0, b = 0;
       a < q.sparse_indices.size() && b < d.sparse_indices.size();) {
    if (q.sparse_indices[a] < d.sparse_indices[b]) {
      ++a;
    } else if (q.sparse_indices[a] > d.sparse_indices[b]) {
      ++b;
    } else {
      sparse += double{q.sparse_values[a++]} * d.sparse_values[b++];
    }
  }
  double colbert = 0;
  const size_t dim = static_cast<size_t>(q.dim);
  const size_t q_rows = dim > 0 ? q.tokens.size() / dim : 0;
  const size_t d_rows = dim > 0 ? d.tokens.size() / dim : 0;
  for (size_t i = 0; i < q_rows; ++i) {
    double best = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < d_rows; ++j) {
      double dot = 0;
      for (size_t k = 0; k < dim; ++k) {
        dot += double{q.tokens[i * dim + k]} * d.tokens[j * dim + k];
      }
      best = std::max(best, dot);
      if (similarity != nullptr) similarity->push_back(static_cast<float>(dot));
    }
    if (d_rows > 0) colbert += best;
  }
  if (q_rows > 0 && !sum) colbert /= static_cast<double>(q_rows);
  return static_cast<float>(
      (w.dense * dense + w.sparse * sparse + w.colbert * colbert) /
      (double{w.dense} + w.sparse + w.colbert));
}

}  // namespace

absl::StatusOr<PreparedScore> PrepareScore(const ScoreQuery& query,
                                           const api::ModelCatalog& host,
                                           const ServiceLimits& limits) {
  PreparedScore p;
  p.model = host.Find(query.model);
  if (p.model == nullptr) {
    return absl::NotFoundError(UnknownModelMessage(query.model, host));
  }
  RETURN_IF_ERROR(CheckTask(*p.model, query.task));
  RETURN_IF_ERROR(CheckItemCount(query, limits));
  RETURN_IF_ERROR(CheckTemplate(query, *p.model));
  RETURN_IF_ERROR(CheckAttentionSelection(query.attention_layers,
                                          query.attention_heads,
                                          query.average_heads, *p.model));
  const bool explain = !query.attention_layers.empty();
  const bool probe = query.positional_probes;
  p.items = query.items.size();
  p.truncated_tokens.assign(query.items.size(), 0);
  const bool truncate = query.truncate.value_or(
      ConfiguredLongInput(*p.model, limits) == LongInputPolicy::kTruncate);
  ASSIGN_OR_RETURN(const auto late, LateWeightsFor(query, *p.model));
  if (late.has_value()) {
    if (probe) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model \"", p.model->name(),
          "\" ranks by late interaction (the query and each document run "
          "apart): it has no pair sequence for positional probes"));
    }
    p.late = true;
    p.weights = *late;
    RETURN_IF_ERROR(PrepareLate(query, truncate, &p));
    return p;
  }
  if (explain) p.sides.resize(query.items.size());
  if (probe) p.probes.resize(query.items.size());
  std::vector<api::EmbedSpec> probes;
  for (size_t i = 0; i < query.items.size(); ++i) {
    int64_t dropped = 0;
    const ScoreItem& item = query.items[i];
    const std::string name = absl::StrCat(query.item_field, "[", i, "]");
    PreparedScore::Sides sides;
    ASSIGN_OR_RETURN(auto spec,
                     ItemSpec(query, item, name, *p.model, truncate, &dropped,
                              explain || probe ? &sides : nullptr, explain));
    p.truncated_tokens[i] = dropped;
    p.total_tokens += static_cast<int64_t>(spec.token_ids.size());
    if (probe && item.pair.has_value()) {
      // Swapped: the second text first, tokenized as a pair of its own.
      int64_t cut = 0;
      ASSIGN_OR_RETURN(auto swapped,
                       ItemSpec(query, ScoreItem{*item.pair, item.text},
                                absl::StrCat(name, " swapped"), *p.model,
                                truncate, &cut, nullptr,
                                /*explain=*/false));
      // Reversed: the same sequence with the second text's tokens in
      // reverse order (their positions and type ids stay).
      api::EmbedSpec reversed = spec;
      reversed.attention_layers.clear();
      reversed.attention_heads.clear();
      reversed.average_heads = false;
      for (size_t a = 0, b = sides.second.size(); a + 1 < b; ++a, --b) {
        std::swap(reversed.token_ids[sides.second[a]],
                  reversed.token_ids[sides.second[b - 1]]);
      }
      const int64_t base = static_cast<int64_t>(query.items.size());
      p.probes[i].swapped = base + static_cast<int64_t>(probes.size());
      p.total_tokens += static_cast<int64_t>(swapped.token_ids.size());
      probes.push_back(std::move(swapped));
      p.probes[i].reversed = base + static_cast<int64_t>(probes.size());
      p.total_tokens += static_cast<int64_t>(reversed.token_ids.size());
      probes.push_back(std::move(reversed));
    }
    if (explain) p.sides[i] = std::move(sides);
    p.sequences.push_back(std::move(spec));
  }
  for (api::EmbedSpec& s : probes) p.sequences.push_back(std::move(s));
  return p;
}

int64_t EstimateScoreResponseBytes(const PreparedScore& prepared) {
  const int64_t labels =
      static_cast<int64_t>(prepared.model->description().head.labels.size());
  int64_t label_bytes = 0;
  for (const std::string& l : prepared.model->description().head.labels) {
    label_bytes += static_cast<int64_t>(l.size()) + 16;
  }
  int64_t explained = 0;
  for (size_t i = 0; i < prepared.sides.size(); ++i) {
    const PreparedScore::Sides& s = prepared.sides[i];
    if (prepared.late) {  // one similarity per query and document token
      explained +=
          static_cast<int64_t>(s.first_tokens.size() * s.second_tokens.size() *
                               sizeof(float)) +
          16 * static_cast<int64_t>(s.first_tokens.size() +
                                    s.second_tokens.size());
      continue;
    }
    const api::EmbedSpec& spec = prepared.sequences[i];
    const int64_t heads =
        spec.average_heads ? 1
        : spec.attention_heads.empty()
            ? prepared.model->description().config.num_heads
            : static_cast<int64_t>(spec.attention_heads.size());
    const int64_t layers = static_cast<int64_t>(spec.attention_layers.size());
    explained += layers * heads * static_cast<int64_t>(s.first.size()) *
                     static_cast<int64_t>(s.second.size()) *
                     static_cast<int64_t>(sizeof(float)) +
                 16 * static_cast<int64_t>(s.first.size() + s.second.size());
  }
  // Every sequence's logits (a probe's too) and labels.
  return 256 + explained +
         static_cast<int64_t>(prepared.sequences.size()) *
             (64 + labels * 8 + label_bytes);
}

namespace {

// The rows of the first text and the columns of the second out of one
// sequence's maps [layers, (heads,) S, S].
void CutPairAttention(const api::EmbedResult& r,
                      const PreparedScore::Sides& sides, ScoredItem* item) {
  const std::vector<int64_t>& shape = r.attention_shape;
  if (shape.size() < 3 || sides.first.empty() || sides.second.empty()) return;
  const int64_t s = shape.back();
  int64_t maps = 1;
  for (size_t k = 0; k + 2 < shape.size(); ++k) maps *= shape[k];
  const int64_t rows = static_cast<int64_t>(sides.first.size());
  const int64_t cols = static_cast<int64_t>(sides.second.size());
  item->pair_attention.reserve(static_cast<size_t>(maps * rows * cols));
  for (int64_t m = 0; m < maps; ++m) {
    const float* map = r.attention.data() + m * s * s;
    for (int64_t q : sides.first) {
      for (int64_t d : sides.second) {
        item->pair_attention.push_back(map[q * s + d]);
      }
    }
  }
  item->pair_attention_shape.assign(shape.begin(), shape.end() - 2);
  item->pair_attention_shape.push_back(rows);
  item->pair_attention_shape.push_back(cols);
  item->first_tokens = sides.first_tokens;
  item->second_tokens = sides.second_tokens;
}

}  // namespace

ScoreAnswer BuildScoreAnswer(std::string request_id,
                             const PreparedScore& prepared,
                             std::vector<api::EmbedResult> results,
                             double total_ms) {
  ScoreAnswer answer;
  const api::ModelDescription& d = prepared.model->description();
  answer.model = d.name;
  answer.request_id = std::move(request_id);
  answer.labels = d.head.labels;
  answer.activation = d.head.activation;
  answer.total_tokens = prepared.total_tokens;
  answer.total_ms = total_ms;
  answer.items.reserve(prepared.items);
  if (prepared.late) answer.activation = model::ScoreActivation::kIdentity;
  for (size_t i = 0; i < prepared.items && i < results.size(); ++i) {
    api::EmbedResult& r = results[i];
    answer.queue_ms = std::max(answer.queue_ms, r.batch.queue_seconds * 1e3);
    answer.inference_ms =
        std::max(answer.inference_ms, r.batch.inference_seconds * 1e3);
    ScoredItem item;
    item.logits = std::move(r.scores);
    if (prepared.late && prepared.items < results.size()) {
      const api::EmbedResult& q = results[prepared.items];
      const bool explain = i < prepared.sides.size();
      if (i < prepared.scored_rows.size()) {
        KeepScoredRows(prepared.scored_rows[i], r.dim, &r.tokens);
      }
      item.logits = {LateScore(q, r, prepared.weights, prepared.colbert,
                               explain ? &item.pair_attention : nullptr)};
      if (explain) {
        const PreparedScore::Sides& sides = prepared.sides[i];
        const int64_t dim = std::max<int64_t>(1, q.dim);
        item.pair_attention_shape = {
            1, static_cast<int64_t>(q.tokens.size()) / dim,
            static_cast<int64_t>(r.tokens.size()) / dim};
        item.first_tokens = sides.first_tokens;
        item.second_tokens = sides.second_tokens;
        answer.token_similarity = true;
      }
    }
    item.tokens = r.num_tokens;
    item.truncated_tokens = prepared.truncated_tokens[i];
    item.truncated = item.truncated_tokens > 0;
    answer.truncated_tokens += item.truncated_tokens;
    if (i < prepared.sides.size() && !prepared.late) {
      CutPairAttention(r, prepared.sides[i], &item);
    }
    if (i < prepared.probes.size() && prepared.probes[i].swapped >= 0) {
      const PreparedScore::Probes& at = prepared.probes[i];
      item.probes = PairProbes{std::move(results[at.swapped].scores),
                               std::move(results[at.reversed].scores)};
    }
    answer.items.push_back(std::move(item));
  }
  return answer;
}

std::vector<float> ActivateScores(const std::vector<float>& logits,
                                  model::ScoreActivation activation) {
  std::vector<float> out(logits.size());
  switch (activation) {
    case model::ScoreActivation::kIdentity:
      out = logits;
      break;
    case model::ScoreActivation::kSigmoid:
      for (size_t i = 0; i < logits.size(); ++i) {
        out[i] = static_cast<float>(1.0 / (1.0 + std::exp(-double{logits[i]})));
      }
      break;
    case model::ScoreActivation::kSoftmax: {
      if (logits.empty()) break;
      const double top = *std::max_element(logits.begin(), logits.end());
      double sum = 0;
      for (float v : logits) sum += std::exp(double{v} - top);
      for (size_t i = 0; i < logits.size(); ++i) {
        out[i] = static_cast<float>(std::exp(double{logits[i]} - top) / sum);
      }
      break;
    }
  }
  return out;
}

std::vector<RankedItem> RankItems(const ScoreAnswer& answer, bool raw,
                                  int64_t top_n) {
  std::vector<RankedItem> ranked;
  ranked.reserve(answer.items.size());
  for (size_t i = 0; i < answer.items.size(); ++i) {
    const std::vector<float>& logits = answer.items[i].logits;
    const std::vector<float> scores =
        raw ? logits : ActivateScores(logits, answer.activation);
    ranked.push_back({static_cast<int64_t>(i), scores.empty() ? 0 : scores[0]});
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const RankedItem& a, const RankedItem& b) {
                     return a.score > b.score;
                   });
  if (top_n > 0 && top_n < static_cast<int64_t>(ranked.size())) {
    ranked.resize(static_cast<size_t>(top_n));
  }
  return ranked;
}

std::vector<LabelScore> LabelScores(const ScoreAnswer& answer, size_t item,
                                    bool raw) {
  const std::vector<float>& logits = answer.items[item].logits;
  const std::vector<float> scores =
      raw ? logits : ActivateScores(logits, answer.activation);
  std::vector<LabelScore> out;
  for (size_t i = 0; i < scores.size(); ++i) {
    out.push_back({i < answer.labels.size() ? answer.labels[i] : "",
                   static_cast<int64_t>(i), scores[i]});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const LabelScore& a, const LabelScore& b) {
                     return a.score > b.score;
                   });
  return out;
}

}  // namespace encoder::core

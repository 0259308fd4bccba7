#include "server/service/embed_request.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/service/status_util.h"
#include "server/service/tensor_proto.h"
#include "server/service/text_input.h"

namespace encoder::service {
namespace {

std::string ModelNames(const runner::ModelCatalog& host) {
  std::vector<std::string> names;
  for (const auto& m : host.List()) names.push_back(m->name());
  return absl::StrJoin(names, ", ");
}

// Checks indices are in [0, limit) without repeats.
absl::Status CheckIndices(const google::protobuf::RepeatedField<int32_t>& v,
                          int64_t limit, const char* what,
                          const std::string& model) {
  std::set<int32_t> seen;
  for (int32_t i : v) {
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
    const google::protobuf::RepeatedField<int32_t>& v, int64_t layers,
    const std::string& model) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (int32_t i : v) {
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

absl::StatusOr<runner::PoolingMode> ToPoolingMode(
    v1::Pooling requested, model::Pooling model_default) {
  switch (requested) {
    case v1::POOLING_MEAN:
      return runner::PoolingMode::kMean;
    case v1::POOLING_FIRST:
      return runner::PoolingMode::kFirst;
    case v1::POOLING_MAX:
      return runner::PoolingMode::kMax;
    case v1::POOLING_LAST_TOKEN:
      return runner::PoolingMode::kLastToken;
    case v1::POOLING_WEIGHTED_MEAN:
      return runner::PoolingMode::kWeightedMean;
    case v1::POOLING_UNSPECIFIED:
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown pooling value ", static_cast<int>(requested)));
  }
  switch (model_default) {
    case model::Pooling::kMean:
      return runner::PoolingMode::kMean;
    case model::Pooling::kFirst:
      return runner::PoolingMode::kFirst;
    case model::Pooling::kMax:
      return runner::PoolingMode::kMax;
    case model::Pooling::kLastToken:
      return runner::PoolingMode::kLastToken;
    case model::Pooling::kWeightedMean:
      return runner::PoolingMode::kWeightedMean;
  }
  return runner::PoolingMode::kMean;
}

std::string LengthLimitReason(const model::ModelConfig& c) {
  if (c.rejects_beyond_max_positions() &&
      c.max_positions - c.first_position() <= c.max_input_tokens) {
    return absl::StrCat(
        "its learned position table has ", c.max_positions, " positions",
        c.first_position() > 0
            ? absl::StrCat(", numbered from ", c.first_position())
            : "");
  }
  return absl::StrCat("max_input_tokens is ", c.max_input_tokens);
}

}  // namespace

absl::Status CheckCost(const runner::EmbedSpec& spec,
                       const runner::ServedModel& model,
                       const std::string& what) {
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

std::string UnknownModelMessage(const std::string& requested,
                                const runner::ModelCatalog& host) {
  return absl::StrCat("model ", QuoteInput(requested),
                      " not found; available: ", ModelNames(host));
}

namespace {

// The checks of a request that do not depend on its inputs: how many there
// are, attention indices, the pooling value, dimensions.
absl::Status CheckRequestOptions(const v1::EmbedRequest& request,
                                 const runner::ServedModel& model,
                                 const ServiceLimits& limits) {
  const model::ModelConfig& config = model.description().config;
  const std::string& name = model.name();
  if (request.inputs_size() == 0) {
    return absl::InvalidArgumentError("request has no inputs");
  }
  if (request.inputs_size() > limits.max_inputs_per_request) {
    return absl::InvalidArgumentError(
        absl::StrCat("request has ", request.inputs_size(), " inputs; at most ",
                     limits.max_inputs_per_request,
                     " per request (--max-inputs-per-request)"));
  }
  const v1::AttentionSelection& attention = request.attention();
  RETURN_IF_ERROR(
      CheckIndices(attention.layers(), config.num_layers, "layer", name));
  RETURN_IF_ERROR(
      CheckIndices(attention.heads(), config.num_heads, "head", name));
  if (attention.layers().empty() &&
      (!attention.heads().empty() || attention.average_heads())) {
    return absl::InvalidArgumentError(
        "attention heads or average_heads given without attention layers");
  }
  if (!v1::Pooling_IsValid(request.pooling())) {
    return absl::InvalidArgumentError(
        absl::StrCat("pooling ", request.pooling(),
                     " is not a Pooling value (POOLING_UNSPECIFIED, "
                     "POOLING_MEAN, POOLING_FIRST)"));
  }
  if (request.has_dimensions()) {
    const int64_t width = model.description().output_dim;
    if (request.dimensions() < 1 || request.dimensions() > width) {
      return absl::InvalidArgumentError(
          absl::StrCat("dimensions is ", request.dimensions(), "; model \"",
                       name, "\" has embeddings of ", width,
                       " values, so dimensions must be 1 to ", width));
    }
  }
  return absl::OkStatus();
}

// What every input of the request asks for (a spec without token ids).
absl::StatusOr<runner::EmbedSpec> SharedSpec(const v1::EmbedRequest& request,
                                             const runner::ServedModel& model) {
  const model::ModelConfig& config = model.description().config;
  const v1::AttentionSelection& attention = request.attention();
  runner::EmbedSpec base;
  ASSIGN_OR_RETURN(base.pooling,
                   ToPoolingMode(request.pooling(), config.pooling));
  base.normalize =
      request.has_normalize() ? request.normalize() : config.normalize;
  base.want_tokens = request.return_token_embeddings();
  base.attention_layers.assign(attention.layers().begin(),
                               attention.layers().end());
  base.attention_heads.assign(attention.heads().begin(),
                              attention.heads().end());
  base.average_heads = attention.average_heads();
  base.want_attention_stats = request.return_attention_stats();
  ASSIGN_OR_RETURN(base.hidden_layers,
                   ResolveHiddenLayers(request.hidden_states().layers(),
                                       config.num_layers, model.name()));
  if (base.hidden_layers.empty() && request.hidden_states().pooled()) {
    return absl::InvalidArgumentError(
        "hidden_states.pooled given without hidden_states.layers");
  }
  base.pool_hidden = request.hidden_states().pooled();
  return base;
}

// inputs[i]'s token ids: as sent, or its text (after `prompt`, when
// given) tokenized; checked against the vocabulary and the model's length
// limit, and cut to it when the request says truncate (*truncated then).
absl::StatusOr<std::vector<int64_t>> InputIds(const v1::EmbedRequest& request,
                                              int i,
                                              const runner::ServedModel& model,
                                              const std::string* prompt,
                                              bool* truncated) {
  const model::ModelConfig& config = model.description().config;
  const std::string& name = model.name();
  const int64_t max_len = config.max_length();
  const v1::Input& input = request.inputs(i);
  std::vector<int64_t> ids;
  *truncated = false;
  switch (input.content_case()) {
    case v1::Input::kTokenIds:
      ids.assign(input.token_ids().ids().begin(),
                 input.token_ids().ids().end());
      break;
    case v1::Input::kText:
    case v1::Input::kTextBytes: {
      const std::string& text = input.content_case() == v1::Input::kText
                                    ? input.text()
                                    : input.text_bytes();
      if (text.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("inputs[", i, "] has empty text"));
      }
      const std::string prompted =
          prompt == nullptr ? std::string() : *prompt + text;
      auto tokens =
          TokenizeText(model, prompt == nullptr ? text : prompted,
                       request.text_options(), request.truncate(), max_len);
      if (!tokens.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("inputs[", i, "]: ", tokens.status().message()));
      }
      ids = std::move(tokens->encoding.ids);
      *truncated = tokens->truncated;
      break;
    }
    default:
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
  if (n > max_len) {
    if (!request.truncate()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "inputs[", i, "] has ", n, " tokens; model \"", name,
          "\" accepts at most ", max_len, " (", LengthLimitReason(config),
          "); shorten it or set truncate"));
    }
    TruncateIds(model, request.text_options().truncation_side(), max_len, &ids);
    *truncated = true;
  }
  return ids;
}

}  // namespace

absl::StatusOr<PreparedEmbed> PrepareEmbed(const v1::EmbedRequest& request,
                                           const runner::ModelCatalog& host,
                                           const ServiceLimits& limits) {
  PreparedEmbed p;
  p.model = host.Find(request.model());
  if (p.model == nullptr) {
    return absl::NotFoundError(UnknownModelMessage(request.model(), host));
  }
  RETURN_IF_ERROR(CheckRequestOptions(request, *p.model, limits));
  if (request.has_dimensions()) p.dimensions = request.dimensions();
  ASSIGN_OR_RETURN(const runner::EmbedSpec base, SharedSpec(request, *p.model));
  ASSIGN_OR_RETURN(const std::string* prompt,
                   ResolvePrompt(*p.model, request.prompt_name()));
  for (int i = 0; i < request.inputs_size(); ++i) {
    runner::EmbedSpec spec = base;
    bool truncated = false;
    ASSIGN_OR_RETURN(spec.token_ids,
                     InputIds(request, i, *p.model, prompt, &truncated));
    spec.cost = p.model->Price(spec);
    RETURN_IF_ERROR(CheckCost(spec, *p.model, absl::StrCat("inputs[", i, "]")));
    p.total_tokens += static_cast<int64_t>(spec.token_ids.size());
    p.truncated.push_back(truncated);
    p.sequences.push_back(std::move(spec));
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
  for (const runner::EmbedSpec& s : p.sequences) {
    const int64_t n = static_cast<int64_t>(s.token_ids.size());
    bytes += 128 + 4 * c.d_model;
    if (s.want_tokens) bytes += 4 * n * c.d_model;
    const int64_t heads =
        s.average_heads
            ? 1
            : (s.attention_heads.empty()
                   ? c.num_heads
                   : static_cast<int64_t>(s.attention_heads.size()));
    bytes +=
        4 * static_cast<int64_t>(s.attention_layers.size()) * heads * n * n;
    if (s.want_attention_stats) bytes += 80 * c.num_layers * c.num_heads;
    bytes += 4 * static_cast<int64_t>(s.hidden_layers.size()) *
             (s.pool_hidden ? 1 : n) * c.d_model;
  }
  return bytes;
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

void FillEmbedResponse(const v1::EmbedRequest& request,
                       const PreparedEmbed& prepared,
                       const std::vector<runner::EmbedResult>& results,
                       double total_ms, v1::EmbedResponse* response) {
  response->set_model(prepared.model->name());
  response->set_request_id(request.request_id());
  double queue_ms = 0, inference_ms = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const runner::EmbedResult& r = results[i];
    v1::EmbedResult* out = response->add_results();
    if (prepared.dimensions > 0 && prepared.dimensions < r.pooled_dim) {
      std::vector<float> cut = r.pooled;
      CutPooled(prepared.dimensions, prepared.sequences[i].normalize, &cut);
      PackFloat32(cut, {prepared.dimensions}, out->mutable_pooled());
    } else {
      PackFloat32(r.pooled, {r.pooled_dim}, out->mutable_pooled());
    }
    if (!r.tokens.empty()) {
      PackFloat32(r.tokens, {r.num_tokens, r.dim},
                  out->mutable_token_embeddings());
    }
    if (!r.attention_shape.empty()) {
      PackFloat32(r.attention, r.attention_shape, out->mutable_attention());
      const runner::EmbedSpec& spec = prepared.sequences[i];
      for (int64_t l : spec.attention_layers) out->add_attention_layers(l);
      if (!spec.average_heads) {
        const int64_t heads = prepared.model->description().config.num_heads;
        if (spec.attention_heads.empty()) {
          for (int64_t h = 0; h < heads; ++h) out->add_attention_heads(h);
        } else {
          for (int64_t h : spec.attention_heads) out->add_attention_heads(h);
        }
      }
    }
    if (!r.hidden_shape.empty()) {
      PackFloat32(r.hidden, r.hidden_shape, out->mutable_hidden_states());
      for (int64_t l : prepared.sequences[i].hidden_layers) {
        out->add_hidden_state_layers(static_cast<int32_t>(l));
      }
    }
    for (const AttentionHeadStats& s : r.attention_stats) {
      PackAttentionStats(s, out->add_attention_stats());
    }
    out->set_num_tokens(r.num_tokens);
    out->set_truncated(prepared.truncated[i]);
    v1::BatchInfo* batch = out->mutable_batch();
    batch->set_batch_size(r.batch.batch_size);
    batch->set_padded_tokens(r.batch.padded_tokens);
    batch->set_queue_ms(r.batch.queue_seconds * 1e3);
    batch->set_inference_ms(r.batch.inference_seconds * 1e3);
    queue_ms = std::max(queue_ms, r.batch.queue_seconds * 1e3);
    inference_ms = std::max(inference_ms, r.batch.inference_seconds * 1e3);
  }
  v1::Timing* timing = response->mutable_timing();
  timing->set_queue_ms(queue_ms);
  timing->set_inference_ms(inference_ms);
  timing->set_total_ms(total_ms);
}

}  // namespace encoder::service

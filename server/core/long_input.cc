#include "server/core/long_input.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/core/text_input.h"
#include "server/model/positional/reach.h"
#include "server/tokenizer/tokenizer.h"

namespace encoder::core {

namespace {

// Where an input's own tokens sit in its whole encoding: the special
// tokens before and after them ([CLS] ... [SEP], <s> ... </s>; none for
// token ids) and, for text, each own token's characters.
struct Framing {
  size_t prefix = 0;
  size_t suffix = 0;
  std::vector<tokenizer::Offsets> chars;
};

absl::StatusOr<Framing> FrameInput(const EmbedQuery& query, int i,
                                   const api::ServedModel& model,
                                   const std::vector<int64_t>& whole) {
  Framing f;
  const EmbedInput& input = query.inputs[static_cast<size_t>(i)];
  if (input.kind != EmbedInput::Kind::kText) return f;
  TextOptions plain = query.text_options;
  plain.add_special_tokens = false;
  ASSIGN_OR_RETURN(TokenizedText body,
                   TokenizeText(model, input.text, plain, false, 0));
  const std::vector<int64_t>& b = body.encoding.ids;
  for (size_t at = 0; at + b.size() <= whole.size(); ++at) {
    if (std::equal(b.begin(), b.end(), whole.begin() + at)) {
      f.prefix = at;
      f.suffix = whole.size() - at - b.size();
      f.chars = std::move(body.encoding.char_offsets);
      return f;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "inputs[", i, "] cannot be chunked: model \"", model.name(),
      "\"'s tokenizer does not keep the text's tokens whole between its "
      "special tokens; truncate it instead"));
}

// auto decided by the drift measured at load (api::MeasuredReach): whole
// up to the longest length that held, in windows beyond; the reason names
// the numbers that decided.
LongInputDefault MeasuredDefault(const api::MeasuredReach& m,
                                 const std::string& from) {
  LongInputDefault out;
  const std::string head =
      absl::StrCat("auto (", from, "), measured at load on a repeated ",
                   m.source.size(), "-token input: its pooled vector");
  const std::string against =
      absl::StrCat(" of its ", m.reference_length, "-token value");
  const std::string bound =
      absl::StrCat("--long-input-drift ", absl::SixDigits(m.max_drift));
  const std::string broke =
      m.breaks_at > 0
          ? absl::StrCat(" and ", absl::SixDigits(m.drifts.back()), " at ",
                         m.breaks_at, " tokens (over ", bound, ")")
          : absl::StrCat(" (within ", bound, "; the extrapolation limit is ",
                         m.limit, ")");
  if (m.holds_up_to <= m.reference_length || m.drifts.empty()) {
    out.policy = LongInputPolicy::kChunk;
    out.reason = absl::StrCat(
        head, " moves ", absl::SixDigits(m.drifts.empty() ? 0 : m.drifts[0]),
        against, " at ", m.lengths.empty() ? 0 : m.lengths[0], " tokens (over ",
        bound,
        "): inputs past the model's length run in "
        "windows of it");
    return out;
  }
  double held = 0;
  for (size_t k = 0; k < m.drifts.size(); ++k) {
    if (m.lengths[k] <= m.holds_up_to) held = std::max(held, m.drifts[k]);
  }
  out.policy = LongInputPolicy::kExtrapolate;
  out.chunk_past_limit = true;
  out.whole_up_to = m.holds_up_to;
  out.reason = absl::StrCat(head, " moves at most ", absl::SixDigits(held),
                            against, " up to ", m.holds_up_to, " tokens", broke,
                            ": inputs run whole up to ", m.holds_up_to,
                            " tokens, in windows beyond");
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Window>> Windows(const EmbedQuery& query, int i,
                                            const api::ServedModel& model,
                                            const std::vector<int64_t>& whole,
                                            bool late,
                                            const ServiceLimits& limits) {
  const int64_t max_len = model.description().max_length;
  ASSIGN_OR_RETURN(const Framing framing, FrameInput(query, i, model, whole));
  const size_t prefix = framing.prefix, suffix = framing.suffix;
  const std::vector<tokenizer::Offsets>& chars = framing.chars;
  // Late chunking runs the whole input: its windows need not fit the model.
  int64_t width = late ? static_cast<int64_t>(whole.size())
                       : max_len - static_cast<int64_t>(prefix) -
                             static_cast<int64_t>(suffix);
  if (query.chunk_tokens > 0) width = std::min(width, query.chunk_tokens);
  if (width < 2) {
    return absl::InvalidArgumentError(
        query.chunk_tokens > 0 && query.chunk_tokens < 2
            ? std::string("chunk_tokens must be at least 2")
            : absl::StrCat("model \"", model.name(), "\" accepts ", max_len,
                           " tokens, too few to chunk with its special "
                           "tokens"));
  }
  if (query.chunk_overlap < 0 || 2 * query.chunk_overlap > width) {
    return absl::InvalidArgumentError(
        absl::StrCat("overlap_tokens is ", query.chunk_overlap, "; model \"",
                     model.name(), "\"'s windows hold ", width,
                     " input tokens, so it must be 0 to ", width / 2));
  }
  const std::vector<int64_t> head(whole.begin(), whole.begin() + prefix);
  const std::vector<int64_t> tail(whole.end() - suffix, whole.end());
  const int64_t body = static_cast<int64_t>(whole.size() - prefix - suffix);
  const int64_t step = width - query.chunk_overlap;
  const int64_t count =
      body <= width ? 1 : 1 + (body - width + step - 1) / step;
  if (count > limits.max_chunks_per_input) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs[", i, "] has ", body, " tokens, ", count,
                     " windows of ", width, " on model \"", model.name(),
                     "\"; at most ", limits.max_chunks_per_input,
                     " windows per input (--max-chunks-per-input)"));
  }
  std::vector<Window> out;
  for (int64_t start = 0;; start += step) {
    const int64_t end = std::min(start + width, body);
    Window w;
    if (!late) {
      w.ids = head;
      w.ids.insert(w.ids.end(), whole.begin() + prefix + start,
                   whole.begin() + prefix + end);
      w.ids.insert(w.ids.end(), tail.begin(), tail.end());
    }
    w.span.token_begin = start;
    w.span.token_end = end;
    if (!chars.empty() && end > start) {
      w.span.char_begin = chars[static_cast<size_t>(start)].start;
      w.span.char_end = chars[static_cast<size_t>(end - 1)].end;
    }
    w.whole_begin = static_cast<int64_t>(prefix) + start;
    out.push_back(std::move(w));
    if (end == body) break;
  }
  return out;
}

int64_t ModelExtrapolationTokens(const api::ServedModel& model,
                                 int64_t server_default) {
  const int64_t own = model.description().max_extrapolation_tokens;
  return own > 0 ? own : server_default;
}

absl::StatusOr<int64_t> ExtrapolationLimit(const api::ServedModel& model,
                                           const ServiceLimits& limits) {
  const api::ModelDescription& d = model.description();
  int64_t limit =
      ModelExtrapolationTokens(model, limits.max_extrapolation_tokens);
  const model::SchemeReach& reach = d.reach;
  if (reach.max_length > 0) limit = std::min(limit, reach.max_length);
  if (limit <= d.max_length) {
    return absl::FailedPreconditionError(
        absl::StrCat("model \"", model.name(), "\" (", d.scheme.name,
                     ") cannot run inputs past its ", d.max_length, " tokens",
                     reach.max_length > 0
                         ? absl::StrCat(": its learned position table ends at ",
                                        reach.max_length)
                         : absl::StrCat(": its extrapolation limit is ", limit),
                     "; chunk or truncate long inputs instead"));
  }
  return limit;
}

void JoinWindows(const PreparedEmbed& prepared,
                 const PreparedEmbed::Input& plan,
                 std::vector<api::EmbedResult>* results, EmbeddedInput* out) {
  api::EmbedResult& r = out->result;
  r = std::move((*results)[plan.first]);
  // Each window's vector, unnormalized, as the runner pooled it.
  std::vector<std::vector<float>> vectors;
  if (plan.late) {
    const size_t width = static_cast<size_t>(r.pooled_dim);
    for (size_t k = 0; k < plan.spans.size(); ++k) {
      vectors.emplace_back(r.span_pooled.begin() + k * width,
                           r.span_pooled.begin() + (k + 1) * width);
    }
    r.span_pooled.clear();
  } else {
    vectors.push_back(r.pooled);
    for (size_t k = 1; k < plan.count; ++k) {
      api::EmbedResult& w = (*results)[plan.first + k];
      vectors.push_back(std::move(w.pooled));
      r.num_tokens += w.num_tokens;
      r.batch.queue_seconds =
          std::max(r.batch.queue_seconds, w.batch.queue_seconds);
      r.batch.inference_seconds =
          std::max(r.batch.inference_seconds, w.batch.inference_seconds);
    }
  }
  // Weighted by the input tokens each window covers, or element-wise max.
  const size_t width = vectors[0].size();
  std::vector<double> acc(width, 0.0);
  double weights = 0;
  for (size_t k = 0; k < vectors.size(); ++k) {
    const ChunkSpan& span = plan.spans[k];
    const double w = static_cast<double>(span.token_end - span.token_begin);
    for (size_t d = 0; d < width; ++d) {
      const double v = vectors[k][d];
      acc[d] = prepared.chunk_max ? (k == 0 ? v : std::max(acc[d], v))
                                  : acc[d] + w * v;
    }
    weights += w;
  }
  r.pooled.assign(width, 0.0f);
  for (size_t d = 0; d < width; ++d) {
    r.pooled[d] = static_cast<float>(
        prepared.chunk_max || weights <= 0 ? acc[d] : acc[d] / weights);
  }
  const bool cut =
      prepared.dimensions > 0 && prepared.dimensions < r.pooled_dim;
  const int64_t keep = cut ? prepared.dimensions : 0;
  CutPooled(keep, plan.normalize, &r.pooled);
  if (cut) r.pooled_dim = prepared.dimensions;
  out->chunks = static_cast<int64_t>(plan.spans.size());
  if (!prepared.return_chunks) return;
  for (size_t k = 0; k < vectors.size(); ++k) {
    ChunkVector c;
    c.embedding = std::move(vectors[k]);
    CutPooled(keep, plan.normalize, &c.embedding);
    c.span = plan.spans[k];
    out->chunk_vectors.push_back(std::move(c));
  }
}

LongInputPolicy ConfiguredLongInput(const api::ServedModel& model,
                                    const ServiceLimits& limits) {
  return model.description().long_input.value_or(limits.long_input);
}

LongInputDefault DefaultLongInput(const api::ServedModel& model,
                                  const ServiceLimits& limits) {
  const api::ModelDescription& d = model.description();
  LongInputDefault out;
  const bool own = d.long_input.has_value();
  out.policy = ConfiguredLongInput(model, limits);
  const std::string from =
      own ? "the model's repository entry" : "the server's --long-input";
  if (out.policy != LongInputPolicy::kAuto) {
    out.reason = absl::StrCat("set by ", from);
    return out;
  }
  // auto: run whole where the scheme's bias depends on distance alone and
  // stops changing with it (ALiBi's linear penalty, relative buckets that
  // saturate), so no position past the trained length is new to the
  // model, or up to the length a rotary scaling was made to reach; else
  // windows of the model's length, in which every position was seen in
  // training.
  if (d.measured_reach) return MeasuredDefault(*d.measured_reach, from);
  const int64_t max_len = d.max_length;
  const model::SchemeReach& reach = d.reach;
  const int64_t limit =
      ModelExtrapolationTokens(model, limits.max_extrapolation_tokens);
  if (!reach.distance_only_reason.empty() && reach.max_length == 0 &&
      limit > max_len) {
    out.policy = LongInputPolicy::kExtrapolate;
    out.chunk_past_limit = true;
    out.reason =
        absl::StrCat("auto (", from, "): ", reach.distance_only_reason,
                     ", so no position past ", max_len,
                     " tokens is new to the model: inputs run whole up to ",
                     limit, " tokens, in windows beyond");
    return out;
  }
  if (reach.scaled_length > max_len && reach.max_length == 0 &&
      limit > max_len) {
    out.policy = LongInputPolicy::kExtrapolate;
    out.chunk_past_limit = true;
    out.whole_up_to = std::min(reach.scaled_length, limit);
    out.reason = absl::StrCat("auto (", from, "): ", reach.scaled_reason,
                              ": inputs run whole up to ", out.whole_up_to,
                              " tokens, in windows beyond");
    return out;
  }
  out.policy = LongInputPolicy::kChunk;
  out.reason = absl::StrCat(
      "auto (", from, "): ",
      reach.max_length > 0 ? absl::StrCat("its learned position table ends at ",
                                          reach.max_length)
      : limit <= max_len
          ? absl::StrCat("its extrapolation limit, ", limit,
                         " tokens (max_extrapolation_tokens or "
                         "--max-extrapolation-tokens), is not past its ",
                         max_len)
          : absl::StrCat(d.scheme.name, " positions past ", max_len,
                         " tokens were not seen in training"),
      ": inputs past ", max_len,
      " tokens run in windows of the model's length");
  return out;
}

}  // namespace encoder::core

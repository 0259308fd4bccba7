#include "server/core/long_input.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/core/text_input.h"
#include "server/diagnostics/scheme_reach.h"

namespace encoder::core {

// inputs[i]'s windows when its `whole` ids are longer than the model
// accepts: the input's own tokens in windows that, with the model's special
// tokens around them for text, fill the model's length, each repeating
// chunk_overlap tokens of the one before, the last ending at the input's
// end.
absl::StatusOr<std::vector<Window>> Windows(const EmbedQuery& query, int i,
                                            const runner::ServedModel& model,
                                            const std::vector<int64_t>& whole,
                                            const ServiceLimits& limits) {
  const int64_t max_len = model.description().config.max_length();
  const EmbedInput& input = query.inputs[static_cast<size_t>(i)];
  size_t prefix = 0, suffix = 0;
  if (input.kind == EmbedInput::Kind::kText &&
      query.text_options.add_special_tokens) {
    // The special tokens are what the whole encoding has around the
    // text's own tokens ([CLS] ... [SEP], <s> ... </s>).
    TextOptions plain = query.text_options;
    plain.add_special_tokens = false;
    ASSIGN_OR_RETURN(TokenizedText body,
                     TokenizeText(model, input.text, plain, false, 0));
    const std::vector<int64_t>& b = body.encoding.ids;
    bool framed = false;
    for (size_t at = 0; at + b.size() <= whole.size(); ++at) {
      if (std::equal(b.begin(), b.end(), whole.begin() + at)) {
        prefix = at;
        suffix = whole.size() - at - b.size();
        framed = true;
        break;
      }
    }
    if (!framed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "inputs[", i, "] cannot be chunked: model \"", model.name(),
          "\"'s tokenizer does not keep the text's tokens whole between its "
          "special tokens; truncate it instead"));
    }
  }
  const int64_t width =
      max_len - static_cast<int64_t>(prefix) - static_cast<int64_t>(suffix);
  if (width < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("model \"", model.name(), "\" accepts ", max_len,
                     " tokens, too few to chunk with its special tokens"));
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
    w.ids = head;
    w.ids.insert(w.ids.end(), whole.begin() + prefix + start,
                 whole.begin() + prefix + end);
    w.ids.insert(w.ids.end(), tail.begin(), tail.end());
    w.tokens = end - start;
    out.push_back(std::move(w));
    if (end == body) break;
  }
  return out;
}

int64_t ModelExtrapolationTokens(const runner::ServedModel& model,
                                 int64_t server_default) {
  const int64_t own = model.description().max_extrapolation_tokens;
  return own > 0 ? own : server_default;
}

absl::StatusOr<int64_t> ExtrapolationLimit(const runner::ServedModel& model,
                                           const ServiceLimits& limits) {
  const runner::ModelDescription& d = model.description();
  int64_t limit =
      ModelExtrapolationTokens(model, limits.max_extrapolation_tokens);
  const diagnostics::SchemeReach reach = diagnostics::AnalyzeReach(d.config);
  if (reach.max_length > 0) limit = std::min(limit, reach.max_length);
  if (limit <= d.config.max_length()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model \"", model.name(), "\" (", d.scheme.name,
        ") cannot run inputs past its ", d.config.max_length(), " tokens",
        reach.max_length > 0
            ? absl::StrCat(": its learned position table ends at ",
                           reach.max_length)
            : absl::StrCat(": its extrapolation limit is ", limit),
        "; chunk or truncate long inputs instead"));
  }
  return limit;
}

// One input's windows aggregated into its first window's result: the
// pooled vectors weighted by the input tokens each covers, or their
// element-wise max; tokens and batch times summed and maxed.
runner::EmbedResult Aggregate(const PreparedEmbed& prepared,
                              const PreparedEmbed::Input& plan,
                              std::vector<runner::EmbedResult>* results) {
  runner::EmbedResult out = std::move((*results)[plan.first]);
  const size_t width = out.pooled.size();
  std::vector<double> acc(width, 0.0);
  double weights = 0;
  for (size_t k = 0; k < plan.count; ++k) {
    const size_t s = plan.first + k;
    const runner::EmbedResult& r = k == 0 ? out : (*results)[s];
    const double w = static_cast<double>(prepared.window_tokens[s]);
    for (size_t d = 0; d < width; ++d) {
      const double v = r.pooled[d];
      if (prepared.chunk_max) {
        acc[d] = k == 0 ? v : std::max(acc[d], v);
      } else {
        acc[d] += w * v;
      }
    }
    weights += w;
    if (k > 0) {
      out.num_tokens += r.num_tokens;
      out.batch.queue_seconds =
          std::max(out.batch.queue_seconds, r.batch.queue_seconds);
      out.batch.inference_seconds =
          std::max(out.batch.inference_seconds, r.batch.inference_seconds);
    }
  }
  for (size_t d = 0; d < width; ++d) {
    out.pooled[d] = static_cast<float>(
        prepared.chunk_max || weights <= 0 ? acc[d] : acc[d] / weights);
  }
  return out;
}

}  // namespace encoder::core

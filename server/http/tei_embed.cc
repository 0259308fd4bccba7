#include "server/http/tei_embed.h"

#include <nlohmann/json.hpp>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/core/status.h"
#include "server/http/http_status.h"
#include "server/http/openai_embeddings.h"
#include "server/http/tei_fields.h"

namespace encoder::http {
namespace {

using json = nlohmann::json;

// The status payload that carries a TEI error type decided while parsing
// ("Empty", or "Body" for a body TEI's JSON extractor would refuse).
constexpr char kTeiErrorType[] = "tei_error_type";

absl::Status Marked(const std::string& message, const char* type) {
  absl::Status s = absl::InvalidArgumentError(message);
  s.SetPayload(kTeiErrorType, absl::Cord(type));
  return s;
}

// A body that does not deserialize: TEI answers 422.
absl::Status Validation(const std::string& message) {
  return Marked(message, "Body");
}

}  // namespace

absl::Status ParseTeiEmbedBody(const std::string& body, bool all,
                               core::EmbedQuery* query) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Validation(
        "the request body must be a JSON object such as {\"inputs\": "
        "\"text\"}");
  }
  std::optional<bool> truncate;
  const TeiSharedFields shared{&query->model, &truncate,
                               &query->text_options.truncation_side,
                               &query->prompt_name};
  for (const auto& [key, value] : j.items()) {
    ASSIGN_OR_RETURN(const bool taken, ParseTeiSharedField(key, value, shared));
    if (taken || value.is_null()) continue;
    if (key == "inputs") {
      std::string param;
      if (value.is_array() && value.empty()) {
        return Marked("inputs cannot be empty", "Empty");
      }
      if (absl::Status s =
              ParseInputsJson(value, "inputs", &query->inputs, &param);
          !s.ok()) {
        return Validation(std::string(s.message()));
      }
    } else if (key == "normalize" && !all) {
      if (!value.is_boolean()) {
        return Validation("normalize must be true or false");
      }
      query->normalize = value.get<bool>();
    } else if (key == "dimensions" && !all) {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 ||
          value.get<int64_t>() > (int64_t{1} << 20)) {
        return Validation("dimensions must be a positive integer");
      }
      query->dimensions = value.get<int64_t>();
    }
    // Other fields are ignored, as TEI's request types ignore them.
  }
  if (query->inputs.empty()) return Validation("inputs is missing");
  query->long_input = TruncatePolicy(truncate);
  if (all) {
    query->token_embeddings = true;
    query->normalize = false;
  } else if (!query->normalize.has_value()) {
    query->normalize = true;  // TEI's default
  }
  return absl::OkStatus();
}

std::string TeiEmbedJson(const core::EmbedAnswer& answer, bool all) {
  std::string out = "[";
  for (size_t i = 0; i < answer.inputs.size(); ++i) {
    const api::EmbedResult& r = answer.inputs[i].result;
    if (i > 0) out += ',';
    if (!all) {
      AppendJsonFloats(r.pooled.data(), r.pooled.size(), &out);
      continue;
    }
    out += '[';
    const size_t dim = static_cast<size_t>(r.dim);
    for (int64_t t = 0; t < r.num_tokens; ++t) {
      if (t > 0) out += ',';
      AppendJsonFloats(r.tokens.data() + t * dim, dim, &out);
    }
    out += ']';
  }
  out += ']';
  return out;
}

absl::Status ParseTeiSparseBody(const std::string& body,
                                core::EmbedQuery* query) {
  RETURN_IF_ERROR(ParseTeiEmbedBody(body, /*all=*/true, query));
  query->token_embeddings = false;
  query->sparse = core::EmbedQuery::Sparse{};
  return absl::OkStatus();
}

std::string TeiSparseJson(const core::EmbedAnswer& answer) {
  std::string out = "[";
  char buffer[64];
  for (size_t i = 0; i < answer.inputs.size(); ++i) {
    const api::EmbedResult& r = answer.inputs[i].result;
    if (i > 0) out += ',';
    out += '[';
    for (size_t k = 0; k < r.sparse_indices.size(); ++k) {
      std::snprintf(buffer, sizeof(buffer), "%s{\"index\":%d,\"value\":%.9g}",
                    k > 0 ? "," : "", r.sparse_indices[k],
                    static_cast<double>(r.sparse_values[k]));
      out += buffer;
    }
    out += ']';
  }
  out += ']';
  return out;
}

absl::Status ParseTeiSimilarityBody(const std::string& body,
                                    core::EmbedQuery* query) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Validation(
        "the request body must be a JSON object such as {\"inputs\": "
        "{\"source_sentence\": \"a\", \"sentences\": [\"b\"]}}");
  }
  const auto inputs = j.find("inputs");
  if (inputs == j.end() || !inputs->is_object()) {
    return Validation(
        "inputs must be {\"source_sentence\": text, \"sentences\": [text]}");
  }
  const auto source = inputs->find("source_sentence");
  const auto sentences = inputs->find("sentences");
  if (source == inputs->end() || !source->is_string() ||
      sentences == inputs->end() || !sentences->is_array()) {
    return Validation(
        "inputs must be {\"source_sentence\": text, \"sentences\": [text]}");
  }
  if (sentences->empty()) return Marked("`sentences` cannot be empty", "Empty");
  query->inputs.push_back(core::EmbedInput::Text(source->get<std::string>()));
  for (const json& s : *sentences) {
    if (!s.is_string()) return Validation("sentences must be texts");
    query->inputs.push_back(core::EmbedInput::Text(s.get<std::string>()));
  }
  if (auto m = j.find("model"); m != j.end()) {
    ASSIGN_OR_RETURN(const bool taken,
                     ParseTeiSharedField("model", *m, {&query->model}));
    (void)taken;
  }
  if (auto p = j.find("parameters"); p != j.end() && !p->is_null()) {
    if (!p->is_object()) {
      return Validation(
          "parameters must be an object such as {\"truncate\": true}");
    }
    // TEI's SimilarityParameters: truncate, truncation_direction,
    // prompt_name (its other fields are ignored).
    std::optional<bool> truncate;
    const TeiSharedFields shared{nullptr, &truncate,
                                 &query->text_options.truncation_side,
                                 &query->prompt_name};
    for (const auto& [key, value] : p->items()) {
      ASSIGN_OR_RETURN(const bool taken,
                       ParseTeiSharedField(key, value, shared));
      (void)taken;
    }
    query->long_input = TruncatePolicy(truncate);
  }
  query->normalize = true;
  return absl::OkStatus();
}

std::string TeiSimilarityJson(const core::EmbedAnswer& answer) {
  std::vector<float> scores;
  const std::vector<float>& source = answer.inputs[0].result.pooled;
  for (size_t i = 1; i < answer.inputs.size(); ++i) {
    const std::vector<float>& v = answer.inputs[i].result.pooled;
    double dot = 0;
    for (size_t d = 0; d < v.size() && d < source.size(); ++d) {
      dot += static_cast<double>(v[d]) * source[d];
    }
    scores.push_back(static_cast<float>(dot));
  }
  std::string out;
  AppendJsonFloats(scores.data(), scores.size(), &out);
  return out;
}

std::string TeiModelOf(const std::string& body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    if (auto m = j.find("model"); m != j.end() && m->is_string()) {
      return m->get<std::string>();
    }
  }
  return "";
}

absl::Status TeiBodyError(const std::string& message) {
  return Validation(message);
}

absl::Status TeiEmptyError(const std::string& message) {
  return Marked(message, "Empty");
}

absl::Status ParseTeiObject(const std::string& body, const char* example,
                            json* j) {
  *j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j->is_discarded() || !j->is_object()) {
    return Validation(absl::StrCat(
        "the request body must be a JSON object such as ", example));
  }
  return absl::OkStatus();
}

TeiError TeiErrorOf(const absl::Status& status) {
  TeiError e;
  std::string type = "Backend";
  e.http_status = 424;
  if (core::IsMissingTask(status)) {
    // TEI: "model is not a re-ranker model" and kin, a backend error.
  } else if (auto t = status.GetPayload(kTeiErrorType); t.has_value()) {
    const bool empty = std::string(*t) == "Empty";
    type = empty ? "Empty" : "Validation";
    e.http_status = empty ? 400 : 422;
  } else {
    switch (status.code()) {
      // TEI answers its validation errors (too long, too many inputs)
      // with 413, and so does this route; an unknown model is 422.
      case absl::StatusCode::kInvalidArgument:
      case absl::StatusCode::kOutOfRange:
      case absl::StatusCode::kFailedPrecondition:
        type = "Validation";
        e.http_status = 413;
        break;
      case absl::StatusCode::kNotFound:
        type = "Validation";
        e.http_status = 422;
        break;
      case absl::StatusCode::kResourceExhausted: {
        // A response over the send limit is too large; a full queue or
        // unread responses over their limit are overload.
        const bool too_large = HttpStatusFor(status) == 413;
        type = too_large ? "Validation" : "Overloaded";
        e.http_status = too_large ? 413 : 429;
        break;
      }
      case absl::StatusCode::kUnavailable:
        type = "Unhealthy";
        e.http_status = 503;
        break;
      case absl::StatusCode::kInternal:
      case absl::StatusCode::kUnknown:
      case absl::StatusCode::kDataLoss:
        break;  // Backend, 424
      default:  // deadline 504, cancelled 499, ...: the front's statuses
        e.http_status = HttpStatusFor(status.code());
        break;
    }
  }
  e.body =
      json{{"error", std::string(status.message())}, {"error_type", type}}.dump(
          -1, ' ', false, json::error_handler_t::replace);
  return e;
}

}  // namespace encoder::http

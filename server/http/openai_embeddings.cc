#include "server/http/openai_embeddings.h"

#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"

namespace encoder::http {
namespace {

using json = nlohmann::json;

// Float32 values as little-endian bytes (what base64 encodes).
std::string Float32Bytes(const float* values, size_t count) {
  std::string out(4 * count, '\0');
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &values[i], 4);
    out[4 * i] = static_cast<char>(bits & 0xff);
    out[4 * i + 1] = static_cast<char>((bits >> 8) & 0xff);
    out[4 * i + 2] = static_cast<char>((bits >> 16) & 0xff);
    out[4 * i + 3] = static_cast<char>(bits >> 24);
  }
  return out;
}

// A JSON token id: an integer in [0, 2^63).
bool ReadTokenId(const json& value, int64_t* id) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    *id = static_cast<int64_t>(v);
    return true;
  }
  if (value.is_number_integer()) {
    *id = value.get<int64_t>();
    return true;
  }
  return false;
}

absl::Status InvalidParam(const std::string& message, std::string* param,
                          const char* name) {
  *param = name;
  return absl::InvalidArgumentError(message);
}

// "long_input": {"policy": "truncate" | "refuse" | "chunk" | "late_chunk" |
// "extrapolate", "overlap_tokens": int, "chunk_tokens": int,
// "aggregation": "mean" | "max", "return_chunks": bool}.
absl::Status ParseLongInput(const json& value, core::EmbedQuery* query,
                            std::optional<LongInputPolicy>* policy,
                            std::string* param) {
  const char* kShape =
      "long_input must be an object such as {\"policy\": \"chunk\" (or "
      "\"truncate\", \"refuse\", \"late_chunk\", \"extrapolate\"), "
      "\"overlap_tokens\": 32, \"chunk_tokens\": 256, \"aggregation\": "
      "\"mean\", \"return_chunks\": false}";
  if (!value.is_object()) return InvalidParam(kShape, param, "long_input");
  auto count = [](const json& item) {
    return item.is_number_integer() && item.get<int64_t>() >= 0 &&
           item.get<int64_t>() <= (1 << 20);
  };
  for (const auto& [key, item] : value.items()) {
    const std::string text = item.is_string() ? item.get<std::string>() : "";
    const std::optional<LongInputPolicy> named = ParseLongInputPolicy(text);
    if (key == "policy" && named && named != LongInputPolicy::kAuto) {
      *policy = named;
    } else if (key == "aggregation" && (text == "mean" || text == "max")) {
      query->chunk_max = text == "max";
    } else if (key == "overlap_tokens" && count(item)) {
      query->chunk_overlap = item.get<int64_t>();
    } else if (key == "chunk_tokens" && count(item)) {
      query->chunk_tokens = item.get<int64_t>();
    } else if (key == "return_chunks" && item.is_boolean()) {
      query->return_chunks = item.get<bool>();
    } else {
      return InvalidParam(absl::StrCat("long_input.", key, " ", item.dump(),
                                       " is not accepted; ", kShape),
                          param, "long_input");
    }
  }
  return absl::OkStatus();
}

// "hidden_states": {"layers": [int, ...], "pooled": bool}.
// "sparse": true or {"top_k": n, "threshold": x} (EmbedRequest's
// return_sparse, sparse_top_k, sparse_threshold); "multi_vector": true
// (return_token_embeddings with project_token_embeddings). Both come from
// the forward pass that makes the dense vector. "input_type": a ColBERT
// model's framing.
absl::Status ParseExtraOutputs(const json& j, core::EmbedQuery* query,
                               std::string* param) {
  if (auto it = j.find("sparse"); it != j.end() && !it->is_null()) {
    core::EmbedQuery::Sparse sparse;
    bool valid = it->is_boolean() || it->is_object();
    if (it->is_object()) {
      for (const auto& [key, item] : it->items()) {
        if (key == "top_k" && item.is_number_integer() &&
            item.get<int64_t>() >= 0 && item.get<int64_t>() <= (1 << 30)) {
          sparse.top_k = item.get<int64_t>();
        } else if (key == "threshold" && item.is_number()) {
          sparse.threshold = item.get<float>();
        } else {
          valid = false;
        }
      }
    }
    if (!valid) {
      return InvalidParam(
          "sparse must be true or {\"top_k\": integer >= 0, \"threshold\": "
          "number}",
          param, "sparse");
    }
    if (!it->is_boolean() || it->get<bool>()) query->sparse = sparse;
  }
  if (auto it = j.find("multi_vector"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return InvalidParam("multi_vector must be true or false", param,
                          "multi_vector");
    }
    query->token_embeddings = query->project_tokens = it->get<bool>();
  }
  // "input_type": "query" or "document" (EmbedRequest.input_type).
  if (auto it = j.find("input_type"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) {
      return InvalidParam("input_type must be \"query\" or \"document\"", param,
                          "input_type");
    }
    query->input_type = it->get<std::string>();
  }
  return absl::OkStatus();
}

absl::Status ParseHiddenStates(const json& value, core::EmbedQuery* query,
                               std::string* param) {
  const char* kShape =
      "hidden_states must be an object such as {\"layers\": [-1], "
      "\"pooled\": false}";
  if (!value.is_object()) return InvalidParam(kShape, param, "hidden_states");
  for (const auto& [key, item] : value.items()) {
    if (key == "layers") {
      if (!item.is_array()) {
        return InvalidParam("hidden_states.layers must be a list of integers",
                            param, "hidden_states");
      }
      for (const json& layer : item) {
        const bool fits = layer.is_number_integer() &&
                          layer.get<int64_t>() >= -(1 << 20) &&
                          layer.get<int64_t>() <= (1 << 20);
        if (!fits) {
          return InvalidParam(absl::StrCat("hidden_states.layers holds ",
                                           layer.dump(), ", not a layer index"),
                              param, "hidden_states");
        }
        query->hidden_layers.push_back(layer.get<int64_t>());
      }
    } else if (key == "pooled") {
      if (!item.is_boolean()) {
        return InvalidParam("hidden_states.pooled must be true or false", param,
                            "hidden_states");
      }
      query->pool_hidden = item.get<bool>();
    } else {
      return InvalidParam(absl::StrCat("hidden_states has an unknown key \"",
                                       key, "\"; ", kShape),
                          param, "hidden_states");
    }
  }
  return absl::OkStatus();
}

// Appends float32 values as a JSON array of numbers or a base64 string
// of their little-endian bytes.
void AppendValues(const std::vector<float>& values, bool base64,
                  std::string* out) {
  if (base64) {
    absl::StrAppend(
        out, "\"",
        absl::Base64Escape(Float32Bytes(values.data(), values.size())), "\"");
    return;
  }
  AppendJsonFloats(values.data(), values.size(), out);
}

// Packed bytes (sign bits, or int8 / uint8 values): int8 (binary, int8)
// or uint8 numbers, or base64 of the bytes.
void AppendPacked(const core::EmbeddedInput& e, bool base64, std::string* out) {
  if (base64) {
    absl::StrAppend(
        out, "\"",
        absl::Base64Escape(absl::string_view(
            reinterpret_cast<const char*>(e.packed.data()), e.packed.size())),
        "\"");
    return;
  }
  const bool binary = e.packing == core::EmbedQuery::Packing::kBinary ||
                      e.packing == core::EmbedQuery::Packing::kInt8;
  *out += '[';
  for (size_t k = 0; k < e.packed.size(); ++k) {
    const int value = binary
                          ? static_cast<int>(static_cast<int8_t>(e.packed[k]))
                          : static_cast<int>(e.packed[k]);
    absl::StrAppend(out, k == 0 ? "" : ",", value);
  }
  *out += ']';
}

void AppendIntList(const std::vector<int64_t>& values, std::string* out) {
  *out += '[';
  for (size_t k = 0; k < values.size(); ++k) {
    absl::StrAppend(out, k == 0 ? "" : ",", values[k]);
  }
  *out += ']';
}

}  // namespace

absl::Status ParseInputsJson(const nlohmann::json& input, const char* name,
                             std::vector<core::EmbedInput>* inputs,
                             std::string* param) {
  const std::string kShape = absl::StrCat(
      name,
      " must be a string, a list of strings, a list of token ids or a list "
      "of token-id lists");
  auto invalid = [&](const std::string& message) {
    return InvalidParam(message, param, name);
  };
  if (input.is_string()) {
    inputs->push_back(core::EmbedInput::Text(input.get<std::string>()));
    return absl::OkStatus();
  }
  if (!input.is_array()) return invalid(kShape);
  if (input.empty()) return invalid(absl::StrCat(name, " is an empty list"));
  const json& first = input.front();
  if (first.is_number()) {
    // One input of token ids.
    std::vector<int64_t> ids;
    ids.reserve(input.size());
    for (size_t k = 0; k < input.size(); ++k) {
      int64_t id = 0;
      if (!ReadTokenId(input[k], &id)) {
        return invalid(absl::StrCat(
            name, "[", k, "] is not a token id (an integer); ", kShape));
      }
      ids.push_back(id);
    }
    inputs->push_back(core::EmbedInput::Ids(std::move(ids)));
    return absl::OkStatus();
  }
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    if (item.is_string() && first.is_string()) {
      inputs->push_back(core::EmbedInput::Text(item.get<std::string>()));
    } else if (item.is_array() && first.is_array()) {
      if (item.empty()) {
        return invalid(absl::StrCat(name, "[", i, "] has no token ids"));
      }
      std::vector<int64_t> ids;
      ids.reserve(item.size());
      for (size_t k = 0; k < item.size(); ++k) {
        int64_t id = 0;
        if (!ReadTokenId(item[k], &id)) {
          return invalid(
              absl::StrCat(name, "[", i, "][", k, "] is not a token id"));
        }
        ids.push_back(id);
      }
      inputs->push_back(core::EmbedInput::Ids(std::move(ids)));
    } else {
      return invalid(absl::StrCat(kShape, "; ", name, "[", i,
                                  "] does not match ", name, "[0]"));
    }
  }
  return absl::OkStatus();
}

void AppendJsonFloats(const float* values, size_t count, std::string* out) {
  *out += '[';
  for (size_t k = 0; k < count; ++k) {
    if (k > 0) *out += ',';
    // Shortest text that reads back as the same float32 (%.9g always
    // does); JSON has no NaN or infinity, which a model never yields.
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.9g",
                  static_cast<double>(values[k]));
    *out += buffer;
  }
  *out += ']';
}

absl::Status ParseEmbeddingsBody(const std::string& body,
                                 core::EmbedQuery* query, bool* base64,
                                 std::string* param) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(
        "the request body is not valid JSON; send an object such as "
        "{\"input\": \"text\", \"model\": \"name\"}");
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError("the request body must be a JSON object");
  }
  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) {
      return InvalidParam("model must be a string", param, "model");
    }
    query->model = it->get<std::string>();
  }
  *base64 = false;
  if (auto it = j.find("encoding_format"); it != j.end() && !it->is_null()) {
    const std::string format = it->is_string() ? it->get<std::string>() : "";
    if (format == "base64") {
      *base64 = true;
    } else if (format != "float") {
      return InvalidParam("encoding_format must be \"float\" or \"base64\"",
                          param, "encoding_format");
    }
  }
  if (auto it = j.find("dimensions"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) {
      return InvalidParam("dimensions must be an integer", param, "dimensions");
    }
    const bool fits =
        it->is_number_unsigned()
            ? it->get<uint64_t>() <= std::numeric_limits<int32_t>::max()
            : it->get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
                  it->get<int64_t>() <= std::numeric_limits<int32_t>::max();
    if (!fits) {
      return InvalidParam(
          absl::StrCat("dimensions ", it->dump(), " is out of range"), param,
          "dimensions");
    }
    // The range the model allows is checked with the request (PrepareEmbed).
    query->dimensions = it->get<int64_t>();
    // OpenAI's shortened embeddings are unit vectors.
    query->normalize = true;
  }
  // Extensions: the EmbedRequest fields of the same names.
  if (auto it = j.find("normalize"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return InvalidParam("normalize must be true or false", param,
                          "normalize");
    }
    query->normalize = it->get<bool>();
  }
  std::optional<bool> truncate;
  if (auto it = j.find("truncate"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return InvalidParam("truncate must be true or false", param, "truncate");
    }
    truncate = it->get<bool>();
  }
  if (auto it = j.find("prompt_name"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) {
      return InvalidParam("prompt_name must be a string", param, "prompt_name");
    }
    query->prompt_name = it->get<std::string>();
  }
  if (auto it = j.find("prompt"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) {
      return InvalidParam("prompt must be a string", param, "prompt");
    }
    query->prompt = it->get<std::string>();
  }
  std::optional<LongInputPolicy> policy;
  if (auto it = j.find("long_input"); it != j.end() && !it->is_null()) {
    RETURN_IF_ERROR(ParseLongInput(*it, query, &policy, param));
  }
  if (auto requested = core::RequestedLongInput(truncate, policy);
      requested.ok()) {
    query->long_input = *requested;
  } else {
    return InvalidParam(std::string(requested.status().message()), param,
                        "long_input");
  }
  if (auto it = j.find("hidden_states"); it != j.end() && !it->is_null()) {
    RETURN_IF_ERROR(ParseHiddenStates(*it, query, param));
  }
  // "embedding_type": "float" | "binary" | "ubinary" (sign bits packed
  // eight to a byte) | "int8" | "uint8" (a byte per value): int8 or uint8
  // numbers, or base64 of the bytes.
  if (auto it = j.find("embedding_type"); it != j.end() && !it->is_null()) {
    const std::string type = it->is_string() ? it->get<std::string>() : "";
    if (type == "binary") {
      query->packing = core::EmbedQuery::Packing::kBinary;
    } else if (type == "ubinary") {
      query->packing = core::EmbedQuery::Packing::kUbinary;
    } else if (type == "int8") {
      query->packing = core::EmbedQuery::Packing::kInt8;
    } else if (type == "uint8") {
      query->packing = core::EmbedQuery::Packing::kUint8;
    } else if (type != "float") {
      return InvalidParam(
          "embedding_type must be \"float\", \"binary\", \"ubinary\", "
          "\"int8\" or \"uint8\"",
          param, "embedding_type");
    }
  }
  // "quantization_ranges": {"min": [...], "max": [...]} for int8 / uint8.
  if (auto it = j.find("quantization_ranges");
      it != j.end() && !it->is_null()) {
    auto floats = [](const json& v, std::vector<float>* out) {
      if (!v.is_array()) return false;
      for (const json& x : v) {
        if (!x.is_number()) return false;
        out->push_back(x.get<float>());
      }
      return true;
    };
    if (!it->is_object() || !it->contains("min") || !it->contains("max") ||
        !floats((*it)["min"], &query->quantization_min) ||
        !floats((*it)["max"], &query->quantization_max)) {
      return InvalidParam(
          "quantization_ranges must be {\"min\": [numbers], \"max\": "
          "[numbers]}",
          param, "quantization_ranges");
    }
  }
  RETURN_IF_ERROR(ParseExtraOutputs(j, query, param));
  // "user" (an end-user id for the provider's abuse monitoring) is
  // accepted and not used.
  const auto input = j.find("input");
  if (input == j.end() || input->is_null()) {
    return InvalidParam("input is missing", param, "input");
  }
  return ParseInputsJson(*input, "input", &query->inputs, param);
}

// "sparse": {"indices": [...], "values": [...]} and "multi_vector":
// {"shape": [rows, width], "data": ...} where the call asked for them.
void AppendExtraOutputs(const core::EmbedAnswer& answer,
                        const api::EmbedResult& r, bool base64,
                        std::string* out) {
  if (answer.sparse_vocab > 0) {
    *out += R"(,"sparse":{"indices":[)";
    for (size_t k = 0; k < r.sparse_indices.size(); ++k) {
      absl::StrAppend(out, k == 0 ? "" : ",", r.sparse_indices[k]);
    }
    *out += R"(],"values":)";
    AppendJsonFloats(r.sparse_values.data(), r.sparse_values.size(), out);
    *out += '}';
  }
  if (!r.tokens.empty() && r.dim > 0) {
    absl::StrAppend(out, R"(,"multi_vector":{"shape":[)",
                    r.tokens.size() / r.dim, ",", r.dim, R"(],"data":)");
    AppendValues(r.tokens, base64, out);
    *out += '}';
  }
}

std::string EmbeddingsResponseJson(const core::EmbedAnswer& answer,
                                   bool base64) {
  // Written by hand: one float at a time through nlohmann::json would
  // allocate a node per value.
  std::string out = R"({"object":"list","data":[)";
  int64_t tokens = 0;
  for (size_t i = 0; i < answer.inputs.size(); ++i) {
    const core::EmbeddedInput& e = answer.inputs[i];
    const api::EmbedResult& r = e.result;
    tokens += r.num_tokens;
    absl::StrAppend(&out, i == 0 ? "" : ",",
                    R"({"object":"embedding","index":)", i, R"(,"embedding":)");
    if (e.packing == core::EmbedQuery::Packing::kFloat) {
      AppendValues(r.pooled, base64, &out);
    } else {
      AppendPacked(e, base64, &out);
    }
    if (!e.chunk_vectors.empty()) {
      out += R"(,"chunks":[)";
      for (size_t k = 0; k < e.chunk_vectors.size(); ++k) {
        const core::ChunkVector& c = e.chunk_vectors[k];
        absl::StrAppend(&out, k == 0 ? "" : ",", R"({"tokens":[)",
                        c.span.token_begin, ",", c.span.token_end,
                        R"(],"chars":[)", c.span.char_begin, ",",
                        c.span.char_end, R"(],"embedding":)");
        AppendValues(c.embedding, base64, &out);
        out += '}';
      }
      out += ']';
    }
    AppendExtraOutputs(answer, r, base64, &out);
    if (!e.hidden_layers.empty()) {
      out += R"(,"hidden_states":{"layers":)";
      AppendIntList(e.hidden_layers, &out);
      out += R"(,"shape":)";
      AppendIntList(r.hidden_shape, &out);
      out += R"(,"data":)";
      AppendValues(r.hidden, base64, &out);
      out += '}';
    }
    out += '}';
  }
  out += ']';
  if (!answer.quantization_min.empty()) {
    out += R"(,"quantization_ranges":{"min":)";
    AppendJsonFloats(answer.quantization_min.data(),
                     answer.quantization_min.size(), &out);
    out += R"(,"max":)";
    AppendJsonFloats(answer.quantization_max.data(),
                     answer.quantization_max.size(), &out);
    out += '}';
  }
  absl::StrAppend(&out, R"(,"model":)", json(answer.model).dump(),
                  R"(,"usage":{"prompt_tokens":)", tokens,
                  R"(,"total_tokens":)", tokens, "}}");
  return out;
}

std::string EmbeddingsErrorParam(const absl::Status& status,
                                 std::string* code) {
  if (status.code() == absl::StatusCode::kNotFound) {
    *code = "model_not_found";
    return "model";
  }
  if (absl::StrContains(status.message(), "prompt")) return "prompt_name";
  if (absl::StrContains(status.message(), "dimensions")) return "dimensions";
  if (absl::StrContains(status.message(), "hidden state") ||
      absl::StrContains(status.message(), "hidden_states")) {
    return "hidden_states";
  }
  if (absl::StrContains(status.message(), "inputs")) return "input";
  return "";
}

}  // namespace encoder::http

#include "server/http/tei_tokens.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/core/text_input.h"
#include "server/http/tei_embed.h"

namespace encoder::http {
namespace {

using json = nlohmann::json;

absl::Status CheckCount(size_t n, int64_t max_texts, const char* what) {
  if (static_cast<int64_t>(n) > max_texts) {
    return absl::InvalidArgumentError(
        absl::StrCat(n, " ", what, " in one request; at most ", max_texts,
                     " (--max-inputs-per-request)"));
  }
  return absl::OkStatus();
}

absl::Status NoTokenizer(const runner::ServedModel& model) {
  return absl::InvalidArgumentError(model.description().no_tokenizer_reason);
}

// A list of ids, or nullopt when `v` is not one.
std::optional<std::vector<int64_t>> Ids(const json& v) {
  if (!v.is_array()) return std::nullopt;
  std::vector<int64_t> ids;
  for (const json& id : v) {
    if (!id.is_number_integer()) return std::nullopt;
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

}  // namespace

absl::Status ParseTeiTokenizeBody(const std::string& body, TeiTokenize* out) {
  json j;
  if (absl::Status s = ParseTeiObject(body, "{\"inputs\": \"text\"}", &j);
      !s.ok()) {
    return s;
  }
  bool have_inputs = false;
  for (const auto& [key, value] : j.items()) {
    if (value.is_null()) continue;
    if (key == "inputs") {
      have_inputs = true;
      if (value.is_string()) {
        out->texts.push_back(value.get<std::string>());
        continue;
      }
      if (!value.is_array()) {
        return TeiBodyError("inputs must be a string or a list of strings");
      }
      if (value.empty()) return TeiEmptyError("`inputs` cannot be empty");
      for (const json& t : value) {
        if (!t.is_string()) {
          return TeiBodyError("inputs must be a string or a list of strings");
        }
        out->texts.push_back(t.get<std::string>());
      }
    } else if (key == "add_special_tokens") {
      if (!value.is_boolean()) {
        return TeiBodyError("add_special_tokens must be true or false");
      }
      out->add_special_tokens = value.get<bool>();
    } else if (key == "prompt_name" || key == "model") {
      if (!value.is_string()) {
        return TeiBodyError(absl::StrCat(key, " must be a string"));
      }
      (key == "model" ? out->model : out->prompt_name) =
          value.get<std::string>();
    }
  }
  if (!have_inputs) return TeiBodyError("inputs is missing");
  return absl::OkStatus();
}

absl::StatusOr<std::string> TeiTokenizeJson(const runner::ServedModel& model,
                                            const TeiTokenize& request,
                                            int64_t max_texts) {
  if (absl::Status s = CheckCount(request.texts.size(), max_texts, "inputs");
      !s.ok()) {
    return s;
  }
  if (model.tokenizer() == nullptr) return NoTokenizer(model);
  absl::StatusOr<std::string> prompt =
      core::ResolvePrompt(model, request.prompt_name, std::nullopt);
  if (!prompt.ok()) return prompt.status();
  core::TextOptions options;
  options.add_special_tokens = request.add_special_tokens;
  json out = json::array();
  for (size_t i = 0; i < request.texts.size(); ++i) {
    const std::string text = *prompt + request.texts[i];
    auto t = core::TokenizeText(model, text, options, /*truncate=*/false, 0);
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs[", i, "]: ", t.status().message()));
    }
    const tokenizer::Encoding& e = t->encoding;
    json tokens = json::array();
    for (size_t k = 0; k < e.size(); ++k) {
      const tokenizer::Offsets& o = e.byte_offsets[k];
      const bool special = e.special_tokens_mask[k] != 0;
      json token = {{"id", e.ids[k]}, {"special", special}};
      if (special && o.start == o.end) {
        token["text"] = e.tokens[k];
        token["start"] = nullptr;
        token["stop"] = nullptr;
      } else {
        token["text"] = text.substr(static_cast<size_t>(o.start),
                                    static_cast<size_t>(o.end - o.start));
        token["start"] = o.start;
        token["stop"] = o.end;
      }
      tokens.push_back(std::move(token));
    }
    out.push_back(std::move(tokens));
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::Status ParseTeiDecodeBody(const std::string& body, TeiDecode* out) {
  json j;
  if (absl::Status s = ParseTeiObject(body, "{\"ids\": [1, 2, 3]}", &j);
      !s.ok()) {
    return s;
  }
  bool have_ids = false;
  for (const auto& [key, value] : j.items()) {
    if (value.is_null()) continue;
    if (key == "ids") {
      have_ids = true;
      if (std::optional<std::vector<int64_t>> one = Ids(value);
          one.has_value() && !value.empty()) {
        out->ids.push_back(*std::move(one));
        continue;
      }
      if (!value.is_array()) {
        return TeiBodyError("ids must be a list of ids or of id lists");
      }
      if (value.empty()) return TeiEmptyError("`ids` cannot be empty");
      for (const json& v : value) {
        std::optional<std::vector<int64_t>> ids = Ids(v);
        if (!ids.has_value()) {
          return TeiBodyError("ids must be a list of ids or of id lists");
        }
        out->ids.push_back(*std::move(ids));
      }
    } else if (key == "skip_special_tokens") {
      if (!value.is_boolean()) {
        return TeiBodyError("skip_special_tokens must be true or false");
      }
      out->skip_special_tokens = value.get<bool>();
    } else if (key == "model") {
      if (!value.is_string()) return TeiBodyError("model must be a string");
      out->model = value.get<std::string>();
    }
  }
  if (!have_ids) return TeiBodyError("ids is missing");
  return absl::OkStatus();
}

absl::StatusOr<std::string> TeiDecodeJson(const runner::ServedModel& model,
                                          const TeiDecode& request,
                                          int64_t max_texts) {
  if (absl::Status s = CheckCount(request.ids.size(), max_texts, "id lists");
      !s.ok()) {
    return s;
  }
  if (model.tokenizer() == nullptr) return NoTokenizer(model);
  json out = json::array();
  for (size_t i = 0; i < request.ids.size(); ++i) {
    absl::StatusOr<std::string> text =
        model.tokenizer()->Decode(request.ids[i], request.skip_special_tokens);
    if (!text.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ids[", i, "]: ", text.status().message()));
    }
    out.push_back(*std::move(text));
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace encoder::http

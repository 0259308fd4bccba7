#include "server/http/tei_tokens.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/core/text_input.h"
#include "server/http/tei_embed.h"

namespace encoder::http {
namespace {

using json = nlohmann::json;

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

// inputs[i] for the i-th text.
void AddText(std::string text, core::TokenizeQuery* out) {
  std::string where = absl::StrCat("inputs[", out->texts.size(), "]");
  out->texts.push_back({std::move(text), std::move(where)});
}

}  // namespace

absl::Status ParseTeiTokenizeBody(const std::string& body,
                                  core::TokenizeQuery* out) {
  out->prompt_name = std::string();  // the model's default prompt
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
        AddText(value.get<std::string>(), out);
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
        AddText(t.get<std::string>(), out);
      }
    } else if (key == "add_special_tokens") {
      if (!value.is_boolean()) {
        return TeiBodyError("add_special_tokens must be true or false");
      }
      out->options.add_special_tokens = value.get<bool>();
    } else if (key == "prompt_name" || key == "model") {
      if (!value.is_string()) {
        return TeiBodyError(absl::StrCat(key, " must be a string"));
      }
      if (key == "model") {
        out->model = value.get<std::string>();
      } else {
        out->prompt_name = value.get<std::string>();
      }
    }
  }
  if (!have_inputs) return TeiBodyError("inputs is missing");
  return absl::OkStatus();
}

std::string TeiTokenizeJson(const core::TokenizeAnswer& answer) {
  json out = json::array();
  for (size_t i = 0; i < answer.encodings.size(); ++i) {
    const std::string& text = answer.texts[i];
    const tokenizer::Encoding& e = answer.encodings[i].encoding;
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

absl::Status ParseTeiDecodeBody(const std::string& body,
                                core::DecodeQuery* out) {
  out->skip_special_tokens = true;  // TEI's default
  out->field = "ids";
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

std::string TeiDecodeJson(const core::DecodeAnswer& answer) {
  json out = json::array();
  for (const std::string& text : answer.texts) out.push_back(text);
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace encoder::http

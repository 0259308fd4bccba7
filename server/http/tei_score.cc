#include "server/http/tei_score.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/http/tei_embed.h"
#include "server/http/tei_fields.h"

namespace encoder::http {
namespace {

using json = nlohmann::json;
// Scores printed as float32 (nine significant digits at most), keys in
// the order written.
using out_json =
    nlohmann::basic_json<nlohmann::ordered_map, std::vector, std::string, bool,
                         std::int64_t, std::uint64_t, float>;

std::string Dump(const out_json& j) {
  return j.dump(-1, ' ', false, out_json::error_handler_t::replace);
}

// TEI's fields of /rerank and /predict: the shared ones (tei_fields.h)
// and raw_scores. Returns false for a key it does not know.
absl::StatusOr<bool> SharedField(const std::string& key, const json& value,
                                 core::ScoreQuery* query,
                                 ScoreRendering* rendering) {
  if (key == "raw_scores") {
    if (!value.is_boolean()) {
      return TeiBodyError("raw_scores must be true or false");
    }
    rendering->raw_scores = value.get<bool>();
    return true;
  }
  return ParseTeiSharedField(
      key, value,
      {&query->model, &query->truncate, &query->truncation_side, nullptr});
}

// A pair if `v` is a list of exactly two strings; a text if a string.
std::optional<core::ScoreItem> Sequence(const json& v) {
  if (v.is_string()) return core::ScoreItem{v.get<std::string>(), std::nullopt};
  if (v.is_array() && v.size() == 2 && v[0].is_string() && v[1].is_string()) {
    return core::ScoreItem{v[0].get<std::string>(), v[1].get<std::string>()};
  }
  return std::nullopt;
}

// /v1/rerank's "attention": {"layers": [int], "heads": [int],
// "average_heads": bool}, as gRPC's AttentionSelection; false when `value`
// is not that.
bool ReadAttentionSelection(const json& value, core::ScoreQuery* query) {
  if (!value.is_object()) return false;
  for (const auto& [key, v] : value.items()) {
    if (key == "layers" || key == "heads") {
      if (!v.is_array()) return false;
      std::vector<int64_t>& out =
          key == "layers" ? query->attention_layers : query->attention_heads;
      for (const json& n : v) {
        if (!n.is_number_integer()) return false;
        out.push_back(n.get<int64_t>());
      }
    } else if (key == "average_heads") {
      if (!v.is_boolean()) return false;
      query->average_heads = v.get<bool>();
    } else {
      return false;
    }
  }
  return true;
}

// A result's explanation (ScoredItem::pair_attention), when it has one.
void AddExplanation(const core::ScoredItem& item, out_json* result) {
  if (item.pair_attention_shape.empty()) return;
  (*result)["attention"] = {{"shape", item.pair_attention_shape},
                            {"values", item.pair_attention}};
  (*result)["query_tokens"] = item.first_tokens;
  (*result)["document_tokens"] = item.second_tokens;
}

}  // namespace

absl::Status ParseTeiRerankBody(const std::string& body,
                                core::ScoreQuery* query,
                                ScoreRendering* rendering) {
  json j;
  if (absl::Status s = ParseTeiObject(
          body, "{\"query\": \"text\", \"texts\": [\"a\", \"b\"]}", &j);
      !s.ok()) {
    return s;
  }
  query->task = core::ScoreQuery::Task::kRerank;
  query->item_field = "texts";
  std::optional<std::string> q;
  bool have_texts = false;
  for (const auto& [key, value] : j.items()) {
    if (value.is_null()) continue;
    absl::StatusOr<bool> shared = SharedField(key, value, query, rendering);
    if (!shared.ok()) return shared.status();
    if (*shared) continue;
    if (key == "query") {
      if (!value.is_string()) return TeiBodyError("query must be a string");
      q = value.get<std::string>();
    } else if (key == "texts") {
      if (!value.is_array()) {
        return TeiBodyError("texts must be a list of strings");
      }
      for (const json& t : value) {
        if (!t.is_string()) {
          return TeiBodyError("texts must be a list of strings");
        }
        rendering->texts.push_back(t.get<std::string>());
      }
      have_texts = true;
    } else if (key == "return_text") {
      if (!value.is_boolean()) {
        return TeiBodyError("return_text must be true or false");
      }
      rendering->return_text = value.get<bool>();
    } else if (key == "instruction") {
      if (!value.is_string()) {
        return TeiBodyError("instruction must be a string");
      }
      query->instruction = value.get<std::string>();
    }
    // Other fields are ignored, as TEI's request types ignore them.
  }
  if (!q.has_value()) return TeiBodyError("query is missing");
  if (!have_texts) return TeiBodyError("texts is missing");
  if (rendering->texts.empty()) return TeiEmptyError("`texts` cannot be empty");
  if (q->empty()) return absl::InvalidArgumentError("query is empty");
  for (const std::string& t : rendering->texts) query->items.push_back({*q, t});
  return absl::OkStatus();
}

std::string TeiRerankJson(const core::ScoreAnswer& answer,
                          const ScoreRendering& rendering) {
  out_json out = out_json::array();
  for (const core::RankedItem& r :
       core::RankItems(answer, rendering.raw_scores, 0)) {
    out_json rank = {{"index", r.index}, {"score", r.score}};
    if (rendering.return_text) {
      rank["text"] = rendering.texts[static_cast<size_t>(r.index)];
    }
    out.push_back(std::move(rank));
  }
  return Dump(out);
}

absl::Status ParseTeiPredictBody(const std::string& body,
                                 core::ScoreQuery* query,
                                 ScoreRendering* rendering) {
  json j;
  if (absl::Status s = ParseTeiObject(body, "{\"inputs\": \"text\"}", &j);
      !s.ok()) {
    return s;
  }
  query->task = core::ScoreQuery::Task::kClassify;
  query->item_field = "inputs";
  bool have_inputs = false;
  for (const auto& [key, value] : j.items()) {
    if (value.is_null()) continue;
    absl::StatusOr<bool> shared = SharedField(key, value, query, rendering);
    if (!shared.ok()) return shared.status();
    if (*shared || key != "inputs") continue;
    have_inputs = true;
    // As TEI's untagged types read it: one sequence (a text, or a list of
    // exactly two texts as a pair) before a batch.
    if (std::optional<core::ScoreItem> one = Sequence(value)) {
      query->items.push_back(std::move(*one));
      continue;
    }
    if (!value.is_array()) {
      return TeiBodyError(
          "inputs must be a text, a [text, text] pair or a list of them");
    }
    if (value.empty()) return TeiEmptyError("`inputs` cannot be empty");
    rendering->batch = true;
    for (const json& v : value) {
      std::optional<core::ScoreItem> item = Sequence(v);
      if (!item.has_value()) {
        return TeiBodyError(
            "each of inputs must be a text or a [text, text] pair");
      }
      query->items.push_back(std::move(*item));
    }
  }
  if (!have_inputs) return TeiBodyError("inputs is missing");
  return absl::OkStatus();
}

std::string TeiPredictJson(const core::ScoreAnswer& answer,
                           const ScoreRendering& rendering) {
  out_json all = out_json::array();
  for (size_t i = 0; i < answer.items.size(); ++i) {
    out_json predictions = out_json::array();
    for (const core::LabelScore& l :
         core::LabelScores(answer, i, rendering.raw_scores)) {
      predictions.push_back({{"score", l.score}, {"label", l.label}});
    }
    if (!rendering.batch) return Dump(predictions);
    all.push_back(std::move(predictions));
  }
  return Dump(all);
}

absl::Status ParseRerankV1Body(const std::string& body, core::ScoreQuery* query,
                               ScoreRendering* rendering, std::string* param) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        "the request body must be a JSON object such as {\"query\": \"text\", "
        "\"documents\": [\"a\", \"b\"]}");
  }
  query->task = core::ScoreQuery::Task::kRerank;
  query->item_field = "documents";
  auto fail = [param](const char* field, std::string message) {
    *param = field;
    return absl::InvalidArgumentError(std::move(message));
  };
  std::string q;
  bool have_documents = false;
  for (const auto& [key, value] : j.items()) {
    if (value.is_null()) continue;
    if (key == "model") {
      if (!value.is_string()) return fail("model", "model must be a string");
      query->model = value.get<std::string>();
    } else if (key == "query") {
      if (!value.is_string()) return fail("query", "query must be a string");
      q = value.get<std::string>();
    } else if (key == "documents") {
      if (!value.is_array()) {
        return fail("documents", "documents must be a list");
      }
      for (const json& d : value) {
        if (d.is_string()) {
          rendering->texts.push_back(d.get<std::string>());
        } else if (d.is_object() && d.contains("text") &&
                   d["text"].is_string()) {
          rendering->texts.push_back(d["text"].get<std::string>());
        } else {
          return fail("documents",
                      "each document must be a string or {\"text\": string}");
        }
      }
      have_documents = true;
    } else if (key == "top_n") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1) {
        return fail("top_n", "top_n must be a positive integer");
      }
      rendering->top_n = value.get<int64_t>();
    } else if (key == "weights") {
      core::ScoreQuery::LateWeights w{0, 0, 0};  // as gRPC's absent fields
      bool valid = value.is_object();
      for (const auto& [part, v] : value.items()) {
        float* slot = part == "dense"     ? &w.dense
                      : part == "sparse"  ? &w.sparse
                      : part == "colbert" ? &w.colbert
                                          : nullptr;
        if (slot == nullptr || !v.is_number()) {
          valid = false;
          break;
        }
        *slot = v.get<float>();
      }
      if (!valid) {
        return fail("weights",
                    "weights must be {\"dense\": x, \"sparse\": y, "
                    "\"colbert\": z} (a part left out counts 0)");
      }
      query->late_weights = w;
    } else if (key == "instruction") {
      if (!value.is_string()) {
        return fail("instruction", "instruction must be a string");
      }
      query->instruction = value.get<std::string>();
    } else if (key == "attention") {
      if (!ReadAttentionSelection(value, query)) {
        return fail("attention",
                    "attention must be {\"layers\": [int], \"heads\": "
                    "[int], \"average_heads\": bool}");
      }
    } else if (key == "return_documents" || key == "raw_scores" ||
               key == "truncate") {
      if (!value.is_boolean()) {
        return fail(key.c_str(), absl::StrCat(key, " must be true or false"));
      }
      const bool v = value.get<bool>();
      if (key == "return_documents") rendering->return_text = v;
      if (key == "raw_scores") rendering->raw_scores = v;
      if (key == "truncate") query->truncate = v;
    }
    // Other fields (max_chunks_per_doc, rank_fields, ...) are ignored.
  }
  if (q.empty()) return fail("query", "query is missing or empty");
  if (!have_documents) return fail("documents", "documents is missing");
  if (rendering->texts.empty()) {
    return fail("documents", "documents is empty");
  }
  for (const std::string& t : rendering->texts) query->items.push_back({q, t});
  return absl::OkStatus();
}

std::string RerankV1Json(const core::ScoreAnswer& answer,
                         const ScoreRendering& rendering) {
  out_json results = out_json::array();
  for (const core::RankedItem& r :
       core::RankItems(answer, rendering.raw_scores, rendering.top_n)) {
    out_json result = {{"index", r.index}, {"relevance_score", r.score}};
    if (rendering.return_text) {
      result["document"] = {
          {"text", rendering.texts[static_cast<size_t>(r.index)]}};
    }
    AddExplanation(answer.items[static_cast<size_t>(r.index)], &result);
    results.push_back(std::move(result));
  }
  out_json out = {{"object", "rerank"},
                  {"id", answer.request_id},
                  {"model", answer.model},
                  {"results", std::move(results)},
                  {"usage",
                   {{"prompt_tokens", answer.total_tokens},
                    {"total_tokens", answer.total_tokens}}}};
  const bool explained = std::any_of(answer.items.begin(), answer.items.end(),
                                     [](const core::ScoredItem& i) {
                                       return !i.pair_attention_shape.empty();
                                     });
  if (explained) {
    out["explanation"] =
        answer.token_similarity ? "token_similarity" : "attention";
  }
  return Dump(out);
}

}  // namespace encoder::http

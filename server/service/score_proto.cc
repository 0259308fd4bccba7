#include "server/service/score_proto.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/service/tensor_proto.h"

namespace encoder::service {
namespace {

tokenizer::TruncationSide Side(v1::TruncationSide side) {
  return side == v1::TRUNCATION_SIDE_LEFT ? tokenizer::TruncationSide::kLeft
                                          : tokenizer::TruncationSide::kRight;
}

template <typename Response>
void FillCommon(const core::ScoreAnswer& answer, Response* response) {
  response->set_model(answer.model);
  response->set_request_id(answer.request_id);
  response->set_total_tokens(answer.total_tokens);
  v1::Timing* timing = response->mutable_timing();
  timing->set_queue_ms(answer.queue_ms);
  timing->set_inference_ms(answer.inference_ms);
  timing->set_total_ms(answer.total_ms);
}

}  // namespace

absl::StatusOr<core::ScoreQuery> ToScoreQuery(
    const v1::RerankRequest& request) {
  if (request.query().empty()) {
    return absl::InvalidArgumentError("query is empty");
  }
  if (request.top_n() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "top_n is ", request.top_n(), "; it must be 0 (all) or more"));
  }
  core::ScoreQuery q;
  q.task = core::ScoreQuery::Task::kRerank;
  q.model = request.model();
  q.request_id = request.request_id();
  q.item_field = "documents";
  if (request.has_truncate()) q.truncate = request.truncate();
  q.truncation_side = Side(request.truncation_side());
  const v1::AttentionSelection& attention = request.attention();
  q.attention_layers.assign(attention.layers().begin(),
                            attention.layers().end());
  q.attention_heads.assign(attention.heads().begin(), attention.heads().end());
  q.average_heads = attention.average_heads();
  q.positional_probes = request.positional_probes();
  if (request.has_weights()) {
    q.late_weights = core::ScoreQuery::LateWeights{request.weights().dense(),
                                                   request.weights().sparse(),
                                                   request.weights().colbert()};
  }
  if (request.has_instruction()) q.instruction = request.instruction();
  q.items.reserve(request.documents_size());
  for (const std::string& document : request.documents()) {
    q.items.push_back({request.query(), document});
  }
  return q;
}

absl::StatusOr<core::ScoreQuery> ToScoreQuery(
    const v1::ClassifyRequest& request) {
  core::ScoreQuery q;
  q.task = core::ScoreQuery::Task::kClassify;
  q.model = request.model();
  q.request_id = request.request_id();
  q.item_field = "inputs";
  if (request.has_truncate()) q.truncate = request.truncate();
  q.truncation_side = Side(request.truncation_side());
  q.items.reserve(request.inputs_size());
  for (const v1::ClassifyInput& input : request.inputs()) {
    core::ScoreItem item{input.text(), std::nullopt};
    if (!input.text_pair().empty()) item.pair = input.text_pair();
    q.items.push_back(std::move(item));
  }
  return q;
}

void FillRerankResponse(const v1::RerankRequest& request,
                        const core::ScoreAnswer& answer,
                        v1::RerankResponse* response) {
  FillCommon(answer, response);
  if (request.attention().layers_size() > 0) {
    response->set_explanation(answer.token_similarity ? "token_similarity"
                                                      : "attention");
  }
  std::vector<core::RankedItem> ranked =
      core::RankItems(answer, request.raw_scores(), request.top_n());
  if (request.keep_order()) {
    std::sort(ranked.begin(), ranked.end(),
              [](const core::RankedItem& a, const core::RankedItem& b) {
                return a.index < b.index;
              });
  }
  for (const core::RankedItem& r : ranked) {
    v1::RerankResult* out = response->add_results();
    out->set_index(static_cast<int32_t>(r.index));
    out->set_score(r.score);
    const core::ScoredItem& item = answer.items[r.index];
    out->set_tokens(static_cast<int32_t>(item.tokens));
    out->set_truncated(item.truncated);
    out->set_truncated_tokens(static_cast<int32_t>(item.truncated_tokens));
    if (request.return_documents()) {
      out->set_document(request.documents(static_cast<int>(r.index)));
    }
    if (!item.pair_attention_shape.empty()) {
      PackFloat32(item.pair_attention, item.pair_attention_shape,
                  out->mutable_attention());
      for (const std::string& t : item.first_tokens) out->add_query_tokens(t);
      for (const std::string& t : item.second_tokens) {
        out->add_document_tokens(t);
      }
    }
    if (item.probes.has_value()) {
      auto first = [&](const std::vector<float>& logits) {
        const std::vector<float> s =
            request.raw_scores()
                ? logits
                : core::ActivateScores(logits, answer.activation);
        return s.empty() ? 0.0f : s[0];
      };
      out->mutable_probes()->set_swapped_score(
          first(item.probes->swapped_logits));
      out->mutable_probes()->set_reversed_document_score(
          first(item.probes->reversed_logits));
    }
  }
}

void FillClassifyResponse(const v1::ClassifyRequest& request,
                          const core::ScoreAnswer& answer,
                          v1::ClassifyResponse* response) {
  FillCommon(answer, response);
  for (size_t i = 0; i < answer.items.size(); ++i) {
    v1::ClassifyResult* out = response->add_results();
    for (const core::LabelScore& l :
         core::LabelScores(answer, i, request.raw_scores())) {
      v1::LabelScore* label = out->add_labels();
      label->set_label(l.label);
      label->set_index(static_cast<int32_t>(l.index));
      label->set_score(l.score);
    }
    out->set_tokens(static_cast<int32_t>(answer.items[i].tokens));
    out->set_truncated(answer.items[i].truncated);
    out->set_truncated_tokens(
        static_cast<int32_t>(answer.items[i].truncated_tokens));
  }
}

}  // namespace encoder::service

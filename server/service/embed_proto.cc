#include "server/service/embed_proto.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/service/tensor_proto.h"

namespace encoder::service {
namespace {

absl::StatusOr<std::optional<model::Pooling>> ToPooling(int value) {
  switch (value) {
    case v1::POOLING_UNSPECIFIED:
      return std::nullopt;
    case v1::POOLING_MEAN:
      return model::Pooling::kMean;
    case v1::POOLING_FIRST:
      return model::Pooling::kFirst;
    case v1::POOLING_MAX:
      return model::Pooling::kMax;
    case v1::POOLING_LAST_TOKEN:
      return model::Pooling::kLastToken;
    case v1::POOLING_WEIGHTED_MEAN:
      return model::Pooling::kWeightedMean;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "pooling ", value,
          " is not a Pooling value (POOLING_UNSPECIFIED, POOLING_MEAN, "
          "POOLING_FIRST, POOLING_MAX, POOLING_LAST_TOKEN, "
          "POOLING_WEIGHTED_MEAN)"));
  }
}

}  // namespace

std::vector<core::EmbedInput> MoveInputs(
    google::protobuf::RepeatedPtrField<v1::Input>* inputs) {
  std::vector<core::EmbedInput> out;
  out.reserve(static_cast<size_t>(inputs->size()));
  for (v1::Input& input : *inputs) {
    switch (input.content_case()) {
      case v1::Input::kText:
        out.push_back(core::EmbedInput::Text(std::move(*input.mutable_text())));
        break;
      case v1::Input::kTextBytes:
        out.push_back(
            core::EmbedInput::Text(std::move(*input.mutable_text_bytes())));
        break;
      case v1::Input::kTokenIds:
        out.push_back(core::EmbedInput::Ids(
            {input.token_ids().ids().begin(), input.token_ids().ids().end()}));
        break;
      default:
        out.emplace_back();  // kNone: refused naming its index
        break;
    }
  }
  return out;
}

core::TextOptions ToTextOptions(const v1::TextOptions& options) {
  core::TextOptions out;
  out.add_special_tokens =
      !options.has_add_special_tokens() || options.add_special_tokens();
  out.truncation_side = options.truncation_side() == v1::TRUNCATION_SIDE_LEFT
                            ? tokenizer::TruncationSide::kLeft
                            : tokenizer::TruncationSide::kRight;
  return out;
}

absl::StatusOr<core::EmbedQuery> ToEmbedQuery(v1::EmbedRequest* request) {
  core::EmbedQuery q;
  auto pooling = ToPooling(request->pooling());
  if (!pooling.ok()) return pooling.status();
  q.pooling = *pooling;
  q.model = request->model();
  q.request_id = request->request_id();
  q.inputs = MoveInputs(request->mutable_inputs());
  if (request->has_normalize()) q.normalize = request->normalize();
  q.text_options = ToTextOptions(request->text_options());
  q.prompt_name = request->prompt_name();
  if (request->has_prompt()) q.prompt = request->prompt();
  const v1::LongInput& long_input = request->long_input();
  std::optional<LongInputPolicy> policy;
  switch (long_input.policy()) {
    case v1::LongInput::POLICY_UNSPECIFIED:
      break;
    case v1::LongInput::POLICY_TRUNCATE:
      policy = LongInputPolicy::kTruncate;
      break;
    case v1::LongInput::POLICY_CHUNK:
      policy = LongInputPolicy::kChunk;
      break;
    case v1::LongInput::POLICY_EXTRAPOLATE:
      policy = LongInputPolicy::kExtrapolate;
      break;
    case v1::LongInput::POLICY_LATE_CHUNK:
      policy = LongInputPolicy::kLateChunk;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("long_input.policy ", long_input.policy(),
                       " is not a LongInput.Policy value"));
  }
  // LongInput.policy TRUNCATE wins over truncate false, as it always has.
  std::optional<bool> truncate;
  if (request->has_truncate()) truncate = request->truncate();
  if (policy == LongInputPolicy::kTruncate) truncate.reset();
  ASSIGN_OR_RETURN(q.long_input, core::RequestedLongInput(truncate, policy));
  if (!v1::LongInput::Aggregation_IsValid(long_input.aggregation())) {
    return absl::InvalidArgumentError(
        absl::StrCat("long_input.aggregation ", long_input.aggregation(),
                     " is not a LongInput.Aggregation value"));
  }
  q.chunk_overlap = long_input.overlap_tokens();
  q.chunk_max = long_input.aggregation() == v1::LongInput::AGGREGATION_MAX;
  q.chunk_tokens = long_input.chunk_tokens();
  q.return_chunks = long_input.return_chunks();
  if (request->has_dimensions()) q.dimensions = request->dimensions();
  switch (request->embedding_type()) {
    case v1::EMBEDDING_TYPE_FLOAT:
      break;
    case v1::EMBEDDING_TYPE_BINARY:
      q.packing = core::EmbedQuery::Packing::kBinary;
      break;
    case v1::EMBEDDING_TYPE_UBINARY:
      q.packing = core::EmbedQuery::Packing::kUbinary;
      break;
    case v1::EMBEDDING_TYPE_INT8:
      q.packing = core::EmbedQuery::Packing::kInt8;
      break;
    case v1::EMBEDDING_TYPE_UINT8:
      q.packing = core::EmbedQuery::Packing::kUint8;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("embedding_type ", request->embedding_type(),
                       " is not an EmbeddingType value"));
  }
  q.quantization_min.assign(request->quantization_ranges().min().begin(),
                            request->quantization_ranges().min().end());
  q.quantization_max.assign(request->quantization_ranges().max().begin(),
                            request->quantization_ranges().max().end());
  const v1::AttentionSelection& attention = request->attention();
  q.attention_layers.assign(attention.layers().begin(),
                            attention.layers().end());
  q.attention_heads.assign(attention.heads().begin(), attention.heads().end());
  q.average_heads = attention.average_heads();
  q.token_embeddings = request->return_token_embeddings();
  q.project_tokens = request->project_token_embeddings();
  q.input_type = request->input_type();
  if (request->return_sparse()) {
    q.sparse = core::EmbedQuery::Sparse{request->sparse_top_k(),
                                        request->sparse_threshold()};
  }
  q.attention_stats = request->return_attention_stats();
  q.hidden_layers.assign(request->hidden_states().layers().begin(),
                         request->hidden_states().layers().end());
  q.pool_hidden = request->hidden_states().pooled();
  return q;
}

void FillEmbedResponse(const core::EmbedAnswer& answer,
                       v1::EmbedResponse* response) {
  response->set_model(answer.model);
  response->set_request_id(answer.request_id);
  if (!answer.quantization_min.empty()) {
    v1::QuantizationRanges* ranges = response->mutable_quantization_ranges();
    ranges->mutable_min()->Add(answer.quantization_min.begin(),
                               answer.quantization_min.end());
    ranges->mutable_max()->Add(answer.quantization_max.begin(),
                               answer.quantization_max.end());
  }
  for (const core::EmbeddedInput& in : answer.inputs) {
    const api::EmbedResult& r = in.result;
    v1::EmbedResult* out = response->add_results();
    if (in.packing == core::EmbedQuery::Packing::kFloat) {
      PackFloat32(r.pooled, {r.pooled_dim}, out->mutable_pooled());
    } else {
      v1::Tensor* pooled = out->mutable_pooled();
      pooled->add_shape(static_cast<int64_t>(in.packed.size()));
      const bool signed_bytes =
          in.packing == core::EmbedQuery::Packing::kBinary ||
          in.packing == core::EmbedQuery::Packing::kInt8;
      pooled->set_dtype(signed_bytes ? v1::DTYPE_INT8 : v1::DTYPE_UINT8);
      pooled->set_data(in.packed.data(), in.packed.size());
    }
    if (!r.tokens.empty()) {
      // Rows: num_tokens, one fewer where the projection skips the first.
      PackFloat32(r.tokens,
                  {static_cast<int64_t>(r.tokens.size()) / r.dim, r.dim},
                  out->mutable_token_embeddings());
    }
    if (answer.sparse_vocab > 0) {
      v1::SparseVector* sparse = out->mutable_sparse();
      sparse->mutable_indices()->Add(r.sparse_indices.begin(),
                                     r.sparse_indices.end());
      sparse->mutable_values()->Add(r.sparse_values.begin(),
                                    r.sparse_values.end());
    }
    if (!r.attention_shape.empty()) {
      PackFloat32(r.attention, r.attention_shape, out->mutable_attention());
      for (int64_t l : in.attention_layers) out->add_attention_layers(l);
      for (int64_t h : in.attention_heads) out->add_attention_heads(h);
    }
    if (!r.hidden_shape.empty()) {
      PackFloat32(r.hidden, r.hidden_shape, out->mutable_hidden_states());
      for (int64_t l : in.hidden_layers) {
        out->add_hidden_state_layers(static_cast<int32_t>(l));
      }
    }
    for (const AttentionHeadStats& s : r.attention_stats) {
      PackAttentionStats(s, out->add_attention_stats());
    }
    out->set_num_tokens(r.num_tokens);
    out->set_truncated(in.truncated);
    out->set_truncated_tokens(static_cast<int32_t>(in.truncated_tokens));
    out->set_chunks(static_cast<int32_t>(in.chunks));
    for (const core::ChunkVector& c : in.chunk_vectors) {
      v1::ChunkVector* v = out->add_chunk_vectors();
      PackFloat32(c.embedding, {static_cast<int64_t>(c.embedding.size())},
                  v->mutable_embedding());
      v->set_token_begin(static_cast<int32_t>(c.span.token_begin));
      v->set_token_end(static_cast<int32_t>(c.span.token_end));
      v->set_char_begin(static_cast<int32_t>(c.span.char_begin));
      v->set_char_end(static_cast<int32_t>(c.span.char_end));
    }
    v1::BatchInfo* batch = out->mutable_batch();
    batch->set_batch_size(r.batch.batch_size);
    batch->set_padded_tokens(r.batch.padded_tokens);
    batch->set_queue_ms(r.batch.queue_seconds * 1e3);
    batch->set_inference_ms(r.batch.inference_seconds * 1e3);
  }
  v1::Timing* timing = response->mutable_timing();
  timing->set_queue_ms(answer.queue_ms);
  timing->set_inference_ms(answer.inference_ms);
  timing->set_total_ms(answer.total_ms);
}

}  // namespace encoder::service

// EmbedSparse's conversions (declared in embed_proto.h): the request is an
// Embed that also asks for each input's sparse vector.
#include <utility>

#include "server/service/embed_proto.h"

namespace encoder::service {

core::EmbedQuery ToSparseQuery(v1::EmbedSparseRequest* request) {
  core::EmbedQuery q;
  q.model = request->model();
  q.request_id = request->request_id();
  q.inputs = MoveInputs(request->mutable_inputs());
  if (request->has_truncate())
    q.long_input = TruncatePolicy(request->truncate());
  q.text_options = ToTextOptions(request->text_options());
  q.prompt_name = request->prompt_name();
  if (request->has_prompt()) q.prompt = request->prompt();
  q.sparse = core::EmbedQuery::Sparse{request->top_k(), request->threshold()};
  return q;
}

void FillSparseResponse(const core::EmbedAnswer& answer,
                        v1::EmbedSparseResponse* response) {
  response->set_model(answer.model);
  response->set_request_id(answer.request_id);
  response->set_vocab_size(static_cast<int32_t>(answer.sparse_vocab));
  for (const core::EmbeddedInput& in : answer.inputs) {
    v1::SparseEmbedding* out = response->add_results();
    out->mutable_indices()->Assign(in.result.sparse_indices.begin(),
                                   in.result.sparse_indices.end());
    out->mutable_values()->Assign(in.result.sparse_values.begin(),
                                  in.result.sparse_values.end());
    out->set_num_tokens(static_cast<int32_t>(in.result.num_tokens));
    out->set_truncated(in.truncated);
    out->set_truncated_tokens(static_cast<int32_t>(in.truncated_tokens));
  }
  v1::Timing* timing = response->mutable_timing();
  timing->set_queue_ms(answer.queue_ms);
  timing->set_inference_ms(answer.inference_ms);
  timing->set_total_ms(answer.total_ms);
}

}  // namespace encoder::service

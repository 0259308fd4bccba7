// The fields of text-embeddings-inference's GET /info that describe the
// served model (model_id, model_dtype, model_type, max_input_length, the
// batch and client limits, auto_truncate, ...), for the server's default
// model. /info carries them at its top level beside its own fields, so a
// client written for TEI reads what it expects.
#ifndef ENCODER_SERVER_HTTP_TEI_INFO_H_
#define ENCODER_SERVER_HTTP_TEI_INFO_H_

#include <nlohmann/json.hpp>

#include "server/core/embed_request.h"
#include "server/core/model_report.h"

namespace encoder::http {

// TEI's Info fields for the reported model (everything but "version", which
// /info already has). model_type is {"reranker": {id2label, label2id}} for a
// cross-encoder, {"classifier": ...} for another head, else
// {"embedding": {"pooling": TEI's name of the model's pooling}}.
// max_concurrent_requests is the model's queue bound in sequences (past
// it calls are refused as overloaded). `io_threads` tokenize the HTTP
// requests (tokenization_workers).
nlohmann::json TeiInfoFields(const core::ModelReport& report,
                             const core::ServiceLimits& limits, int io_threads);

}  // namespace encoder::http

#endif  // ENCODER_SERVER_HTTP_TEI_INFO_H_

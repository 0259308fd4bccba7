// The gRPC front's conversions for Rerank and Classify: their requests
// into the core's ScoreQuery, and its ScoreAnswer back.
#ifndef ENCODER_SERVER_SERVICE_SCORE_PROTO_H_
#define ENCODER_SERVER_SERVICE_SCORE_PROTO_H_

#include "absl/status/statusor.h"
#include "encoder/v1/encoder.pb.h"
#include "server/core/score_request.h"

namespace encoder::service {

// INVALID_ARGUMENT for an empty query or a negative top_n.
absl::StatusOr<core::ScoreQuery> ToScoreQuery(const v1::RerankRequest& request);
absl::StatusOr<core::ScoreQuery> ToScoreQuery(
    const v1::ClassifyRequest& request);

void FillRerankResponse(const v1::RerankRequest& request,
                        const core::ScoreAnswer& answer,
                        v1::RerankResponse* response);
void FillClassifyResponse(const v1::ClassifyRequest& request,
                          const core::ScoreAnswer& answer,
                          v1::ClassifyResponse* response);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_SCORE_PROTO_H_

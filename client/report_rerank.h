// A self-contained HTML page that explains a Rerank answer: per document
// its rank, score and positional probes (swapped, document reversed), and
// the heatmap of the attention from the query's tokens (rows) to the
// document's (columns), averaged over the layers and heads the request
// chose.
#ifndef ENCODER_CLIENT_REPORT_RERANK_H_
#define ENCODER_CLIENT_REPORT_RERANK_H_

#include <string>

#include "encoder/v1/encoder.pb.h"

namespace encoder_client {

// The page for `response` to `request` (its query, its documents by
// index, its attention selection). A result without attention shows its
// scores only.
std::string RerankReportHtml(const encoder::v1::RerankRequest& request,
                             const encoder::v1::RerankResponse& response);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_REPORT_RERANK_H_

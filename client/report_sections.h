// The per-model part of the HTML report: attention heatmap grid, positional
// matrix, distance profiles and attention statistics.
#ifndef ENCODER_CLIENT_REPORT_SECTIONS_H_
#define ENCODER_CLIENT_REPORT_SECTIONS_H_

#include <string>
#include <vector>

#include "client/report.h"

namespace encoder_client {

// Token labels as drawn on heatmap axes: a space becomes "␣" and labels
// longer than 7 characters are shortened with "…". Not yet escaped.
std::vector<std::string> DisplayLabels(const encoder::v1::DiagnoseResponse& d);

// Mean of a[i][i + k] over every query row i, per offset k = j - i in
// [-(n-1), n-1] (index k + n - 1), for an n x n row-major matrix.
std::vector<double> MeanByOffset(const std::vector<double>& matrix, int n);

// The <section> of one model; `index` makes its element ids unique.
std::string ModelSectionHtml(const ModelDiagnosis& model, size_t index,
                             int32_t max_layers, int32_t max_heads);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_REPORT_SECTIONS_H_

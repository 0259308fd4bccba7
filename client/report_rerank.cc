#include "client/report_rerank.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "client/html_writer.h"
#include "client/tensor_codec.h"

namespace encoder_client {
namespace {

constexpr char kStyle[] = R"css(
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fafbfc}
main{max-width:1100px;margin:0 auto;padding:16px 24px}
h1{font-size:22px;margin:8px 0}.meta{color:#57606a}
section{background:#fff;border:1px solid #d0d7de;border-radius:6px;margin:14px 0;padding:10px 14px}
h2{font-size:16px;margin:4px 0 8px}.doc{color:#57606a;margin:0 0 8px}
table{border-collapse:collapse}td,th{padding:2px 10px 2px 0;text-align:left}
.map{overflow-x:auto}
)css";

// The [.., Q, D] attention averaged over its leading dimensions into
// [Q, D]; empty when it cannot be decoded.
std::vector<double> MeanMap(const encoder::v1::Tensor& t, int* rows,
                            int* cols) {
  std::vector<double> values;
  std::string error;
  const int dims = t.shape_size();
  if (dims < 2 || !DecodeTensor(t, &values, &error)) return {};
  *rows = static_cast<int>(t.shape(dims - 2));
  *cols = static_cast<int>(t.shape(dims - 1));
  const size_t plane = static_cast<size_t>(*rows) * *cols;
  if (plane == 0 || values.size() % plane != 0) return {};
  const size_t maps = values.size() / plane;
  std::vector<double> mean(plane, 0.0);
  for (size_t m = 0; m < maps; ++m) {
    for (size_t k = 0; k < plane; ++k) mean[k] += values[m * plane + k];
  }
  for (double& v : mean) v /= static_cast<double>(maps);
  return mean;
}

std::string Selection(const encoder::v1::AttentionSelection& a) {
  auto list = [](const auto& v) {
    std::string s;
    for (int i = 0; i < v.size(); ++i) {
      s += (i > 0 ? ", " : "") + std::to_string(v.Get(i));
    }
    return s;
  };
  std::string out = "layers " + list(a.layers());
  out += a.heads_size() > 0 ? ", heads " + list(a.heads()) : ", all heads";
  return out + ", averaged";
}

}  // namespace

std::string RerankReportHtml(const encoder::v1::RerankRequest& request,
                             const encoder::v1::RerankResponse& response) {
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width\">"
      "<title>Rerank explained</title><style>";
  html += kStyle;
  html += "</style></head><body><main><h1>Rerank explained</h1>";
  html +=
      "<p class=\"meta\">model " + EscapeHtml(response.model()) + " \u00b7 " +
      std::to_string(response.results_size()) + " documents \u00b7 " +
      (response.explanation() == "token_similarity" ? "late-interaction scores"
       : request.raw_scores()                       ? "raw logits"
                                                    : "activated scores") +
      "</p><p><b>Query:</b> " + EscapeHtml(request.query()) + "</p>";
  if (request.positional_probes()) {
    html +=
        "<p class=\"meta\">Probes: <i>swapped</i> scores the document "
        "first and the query second; <i>reversed</i> scores the document's "
        "tokens in reverse order. A probe near the score means the model "
        "does not read that order.</p>";
  }
  for (int r = 0; r < response.results_size(); ++r) {
    const encoder::v1::RerankResult& result = response.results(r);
    const int index = result.index();
    html += "<section><h2>#" + std::to_string(r + 1) + " \u00b7 document " +
            std::to_string(index) + " \u00b7 score " +
            FormatNumber(result.score(), 4) + "</h2>";
    if (index >= 0 && index < request.documents_size()) {
      html +=
          "<p class=\"doc\">" + EscapeHtml(request.documents(index)) + "</p>";
    }
    html += "<table><tr><th>tokens</th><td>" + std::to_string(result.tokens()) +
            (result.truncated() ? " (truncated)" : "") + "</td></tr>";
    if (result.has_probes()) {
      html += "<tr><th>swapped</th><td>" +
              FormatNumber(result.probes().swapped_score(), 4) +
              "</td></tr><tr><th>document reversed</th><td>" +
              FormatNumber(result.probes().reversed_document_score(), 4) +
              "</td></tr>";
    }
    html += "</table>";
    int rows = 0, cols = 0;
    const std::vector<double> map =
        result.has_attention() ? MeanMap(result.attention(), &rows, &cols)
                               : std::vector<double>{};
    if (!map.empty()) {
      HeatmapSpec spec;
      spec.rows = rows;
      spec.cols = cols;
      spec.values = map;
      spec.row_labels.assign(result.query_tokens().begin(),
                             result.query_tokens().end());
      spec.col_labels.assign(result.document_tokens().begin(),
                             result.document_tokens().end());
      spec.row_labels.resize(rows);
      spec.col_labels.resize(cols);
      spec.cell_px = 14;
      if (response.explanation() == "token_similarity") {
        // A late-interaction model's alignment: signed products.
        double limit = 1e-9;
        for (double v : map) limit = std::max(limit, std::abs(v));
        spec.scale = ColorScale::Diverging(limit);
        spec.title = "query token vectors (rows) by document token vectors";
        html +=
            "<p class=\"meta\">Token similarity (late interaction): the "
            "product of each query token vector (rows) with each document "
            "token vector (columns); each row's largest is the document "
            "token that query token matched (MaxSim).</p>";
        html += "<div class=\"map\">" + HeatmapSvg(spec) +
                LegendSvg(spec.scale, "similarity") + "</div>";
      } else {
        const double top =
            std::max(1e-9, *std::max_element(map.begin(), map.end()));
        spec.scale = ColorScale::Sequential(0.0, top, 0.6);
        spec.title = "attention from query tokens (rows) to document tokens";
        html +=
            "<p class=\"meta\">Attention, query tokens (rows) to document "
            "tokens (columns): " +
            EscapeHtml(Selection(request.attention())) + "</p>";
        html += "<div class=\"map\">" + HeatmapSvg(spec) +
                LegendSvg(spec.scale, "attention") + "</div>";
      }
    }
    html += "</section>";
  }
  html += "</main></body></html>\n";
  return html;
}

}  // namespace encoder_client

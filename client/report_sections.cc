#include "client/report_sections.h"

#include <algorithm>
#include <cmath>

#include "client/html_writer.h"
#include "client/svg_charts.h"
#include "client/tensor_codec.h"

namespace encoder_client {
namespace {

using encoder::v1::AttentionHeadStats;
using encoder::v1::DiagnoseResponse;

// A decoded tensor; empty `shape` when it was absent or malformed.
struct Matrix {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

Matrix Decode(const encoder::v1::Tensor& tensor) {
  Matrix m;
  std::string error;
  if (tensor.shape_size() == 0 || !DecodeTensor(tensor, &m.values, &error)) {
    return {};
  }
  m.shape.assign(tensor.shape().begin(), tensor.shape().end());
  return m;
}

std::string Paragraph(std::string_view cls, std::string_view text) {
  return "<p class=\"" + std::string(cls) + "\">" + EscapeHtml(text) + "</p>";
}

// "0", "", "", "", "4", ... : position numbers every `every` positions.
std::vector<std::string> PositionLabels(int n) {
  const int every = n <= 16 ? 2 : n <= 48 ? 4 : n <= 96 ? 8 : 16;
  std::vector<std::string> labels(n);
  for (int i = 0; i < n; i += every) labels[i] = std::to_string(i);
  return labels;
}

// Side of one heatmap square so that n squares take about `target` pixels.
int CellPx(int n, int target, int low, int high) {
  return std::clamp(target / std::max(n, 1), low, high);
}

double MaxAbs(const std::vector<double>& values) {
  double m = 0;
  for (double v : values) {
    if (std::isfinite(v)) m = std::max(m, std::abs(v));
  }
  return m;
}

// Offsets -(n-1) .. n-1 as chart x values.
std::vector<double> Offsets(int n) {
  std::vector<double> x;
  for (int k = -(n - 1); k <= n - 1; ++k) x.push_back(k);
  return x;
}

// One <dt>/<dd> pair of a figure list.
std::string Fact(std::string_view name, std::string_view value) {
  return "<div><dt>" + EscapeHtml(name) + "</dt><dd>" + EscapeHtml(value) +
         "</dd></div>";
}

std::string JoinNumbers(const std::vector<double>& values) {
  std::string out;
  for (double v : values) out += (out.empty() ? "" : ", ") + FormatNumber(v);
  return out;
}

std::string AttentionGrid(const ModelDiagnosis& model, int32_t max_layers,
                          int32_t max_heads) {
  const DiagnoseResponse& d = model.diagnosis;
  const Matrix maps = Decode(d.attention_maps());
  const int s = d.token_labels_size();
  if (maps.shape.size() != 4 || maps.shape[2] != s || maps.shape[3] != s) {
    return Paragraph("missing", "The server returned no attention maps.");
  }
  const int layers = static_cast<int>(maps.shape[0]);
  const int heads = static_cast<int>(maps.shape[1]);
  const int shown_layers =
      max_layers > 0 ? std::min(max_layers, layers) : layers;
  const int shown_heads = max_heads > 0 ? std::min(max_heads, heads) : heads;
  const ColorScale scale = ColorScale::Sequential(0.0, 1.0, 0.5);
  const std::vector<std::string> labels = DisplayLabels(d);
  const std::string name = EscapeHtml(d.model());

  std::string out =
      "<p class=\"hint\">Showing " + std::to_string(shown_layers) + " of " +
      std::to_string(layers) + " layers and " + std::to_string(shown_heads) +
      " of " + std::to_string(heads) +
      " heads. Rows: the token that "
      "looks (query); columns: the token looked at (key). A grid wider "
      "than the window scrolls sideways.</p>";
  out += LegendSvg(scale, "attention weight (square-root color scale)");
  out +=
      "<div class=\"hgrid-wrap\"><div class=\"hgrid\" "
      "style=\"grid-template-columns:auto repeat(" +
      std::to_string(shown_heads) + ",max-content)\"><div></div>";
  for (int h = 0; h < shown_heads; ++h) {
    out += "<div class=\"colhead\">head " + std::to_string(h) + "</div>";
  }
  const size_t plane = static_cast<size_t>(s) * s;
  for (int l = 0; l < shown_layers; ++l) {
    out += "<div class=\"rowhead\">layer " + std::to_string(l) + "</div>";
    for (int h = 0; h < shown_heads; ++h) {
      HeatmapSpec spec;
      spec.rows = s;
      spec.cols = s;
      const auto begin =
          maps.values.begin() + (static_cast<size_t>(l) * heads + h) * plane;
      spec.values.assign(begin, begin + plane);
      spec.row_labels = labels;
      spec.col_labels = labels;
      spec.cell_px = CellPx(s, 200, 4, 14);
      spec.scale = scale;
      spec.attributes = "class=\"heatmap\" data-model=\"" + name +
                        "\" data-layer=\"" + std::to_string(l) +
                        "\" data-head=\"" + std::to_string(h) +
                        "\" data-tokens=\"" + std::to_string(s) + "\"";
      spec.title = d.model() + ", layer " + std::to_string(l) + ", head " +
                   std::to_string(h) +
                   ": row = query token, column = key token";
      out += "<div class=\"cell\">" + HeatmapSvg(spec) + "</div>";
    }
  }
  return out + "</div></div>";
}

std::string PositionalMatrix(const ModelDiagnosis& model) {
  const encoder::v1::StructureProbe& st = model.diagnosis.structure();
  const int n = st.positions();
  if (!model.diagnosis.has_structure()) {
    return Paragraph("missing", "The server returned no structure probe.");
  }
  std::string out;
  if (st.kind() == "none") {
    return out + Paragraph("nosignal",
                           "No positional signal: this model is given no "
                           "information about where a token sits, so there "
                           "is no positional matrix to show. It can only "
                           "see which tokens occur, not their order.");
  }
  if (st.kind() == "additive" || st.kind() == "rotary") {
    const bool additive = st.kind() == "additive";
    const Matrix m = Decode(additive ? st.gram() : st.relativity());
    if (m.shape.size() != 2 || m.shape[0] != n || m.shape[1] != n) {
      return Paragraph("missing", "The positional matrix is missing.");
    }
    out += Paragraph(
        "hint", additive
                    ? "Gram matrix: cell (m, n) is PE(m)·PE(n), the similarity "
                      "of the position codes of positions m (row) and n "
                      "(column). Red: similar; blue: opposed."
                    : "Relativity table: cell (m, n) is the score <R_m q, R_n "
                      "k> of one fixed query at position m (row) and one fixed "
                      "key at position n (column). Constant diagonals mean the "
                      "score depends only on n − m.");
    HeatmapSpec spec;
    spec.rows = n;
    spec.cols = n;
    spec.values = m.values;
    spec.row_labels = PositionLabels(n);
    spec.col_labels = spec.row_labels;
    spec.cell_px = CellPx(n, 256, 3, 12);
    spec.scale = ColorScale::Diverging(MaxAbs(m.values));
    spec.attributes = "class=\"posmap\"";
    spec.title = additive ? "Gram matrix PE(m)·PE(n)" : "Relativity table";
    out += "<div class=\"row\">" + HeatmapSvg(spec) +
           LegendSvg(spec.scale, additive ? "PE(m)·PE(n)" : "score") +
           "<dl class=\"figures\">";
    if (additive) {
      out += Fact("Toeplitz deviation", FormatNumber(st.toeplitz_deviation()));
      out += Fact("min code distance", FormatNumber(st.min_code_distance()));
      for (int i = 0; i < st.shift_ks_size() && i < st.shift_residuals_size();
           ++i) {
        out += Fact("shift residual, k = " + std::to_string(st.shift_ks(i)),
                    FormatNumber(st.shift_residuals(i)));
      }
    } else {
      out +=
          Fact("relativity deviation", FormatNumber(st.relativity_deviation()));
      out +=
          Fact("norm ratio deviation", FormatNumber(st.norm_ratio_deviation()));
    }
    return out + "</dl></div>";
  }
  const Matrix bias = Decode(st.bias());
  if (bias.shape.size() != 3 || bias.shape[1] != n || bias.shape[2] != n) {
    return Paragraph("missing", "The bias matrix is missing.");
  }
  out += Paragraph("hint",
                   "Bias matrix per head: cell (i, j) is the number added to "
                   "the attention score of query position i (row) and key "
                   "position j (column). Blue lowers attention, red raises "
                   "it. Each head has its own color scale, set by its largest "
                   "|bias|; the caption gives the head's range.");
  out += LegendSvg(ColorScale::Diverging(1.0),
                   "bias / largest |bias| of the head");
  out += "<div class=\"row tight\">";
  const size_t plane = static_cast<size_t>(n) * n;
  for (int64_t h = 0; h < bias.shape[0]; ++h) {
    HeatmapSpec spec;
    spec.rows = n;
    spec.cols = n;
    spec.values.assign(bias.values.begin() + h * plane,
                       bias.values.begin() + (h + 1) * plane);
    spec.row_labels = PositionLabels(n);
    spec.col_labels = spec.row_labels;
    spec.cell_px = CellPx(n, 128, 2, 8);
    spec.scale = ColorScale::Diverging(MaxAbs(spec.values));
    spec.attributes = "class=\"posmap\"";
    spec.title = "bias of head " + std::to_string(h);
    std::string caption = "head " + std::to_string(h);
    if (h < st.slopes_size()) {
      caption += ", slope " + FormatNumber(st.slopes(h));
    }
    const auto [low, high] =
        std::minmax_element(spec.values.begin(), spec.values.end());
    out += "<figure class=\"small\">" + HeatmapSvg(spec) + "<figcaption>" +
           EscapeHtml(caption) + "<br>" + FormatNumber(*low) + " to " +
           FormatNumber(*high) + "</figcaption></figure>";
  }
  out += "</div><dl class=\"figures\">";
  out += Fact("symmetric", std::string(st.symmetric() ? "yes" : "no") +
                               " (deviation " +
                               FormatNumber(st.symmetry_deviation()) + ")");
  out += Fact("Toeplitz", std::string(st.toeplitz() ? "yes" : "no") +
                              " (deviation " +
                              FormatNumber(st.toeplitz_deviation()) + ")");
  if (st.slopes_size() > 0) {
    out +=
        Fact("slopes", JoinNumbers({st.slopes().begin(), st.slopes().end()}));
  }
  return out + "</dl>";
}

std::string DistanceProfiles(const ModelDiagnosis& model) {
  const DiagnoseResponse& d = model.diagnosis;
  const encoder::v1::StructureProbe& st = d.structure();
  const int n = st.positions();
  std::string out = "<div class=\"row\">";
  if (st.kind() == "additive" && st.similarity_by_distance_size() > 0) {
    LineChartSpec chart;
    chart.title = "Position-code similarity by distance";
    chart.x_label = "distance k = |m − n|";
    chart.y_label = "mean PE(m)·PE(m+k)";
    ChartSeries& s = chart.series.emplace_back();
    s.name = "similarity";
    for (int k = 0; k < st.similarity_by_distance_size(); ++k) {
      s.x.push_back(k);
      s.y.push_back(st.similarity_by_distance(k));
    }
    out += LineChartHtml(chart);
  } else if (st.kind() == "rotary") {
    const Matrix m = Decode(st.relativity());
    if (m.shape.size() == 2 && m.shape[0] == n) {
      LineChartSpec chart;
      chart.title = "Rotary score by offset";
      chart.x_label = "offset n − m";
      chart.y_label = "mean <R_m q, R_n k>";
      chart.series.push_back({"score", Offsets(n), MeanByOffset(m.values, n)});
      out += LineChartHtml(chart);
    }
  } else if (st.kind() == "bias") {
    const Matrix bias = Decode(st.bias());
    if (bias.shape.size() == 3 && bias.shape[1] == n) {
      LineChartSpec chart;
      chart.title = "Bias by offset, per head";
      chart.x_label = "offset j − i (key − query)";
      chart.y_label = "mean bias";
      const size_t plane = static_cast<size_t>(n) * n;
      for (int64_t h = 0; h < bias.shape[0]; ++h) {
        chart.series.push_back(
            {"head " + std::to_string(h), Offsets(n),
             MeanByOffset({bias.values.begin() + h * plane,
                           bias.values.begin() + (h + 1) * plane},
                          n)});
      }
      out += LineChartHtml(chart);
    }
  }
  const Matrix maps = Decode(d.attention_maps());
  const int s = d.token_labels_size();
  if (maps.shape.size() == 4 && maps.shape[2] == s && maps.shape[3] == s) {
    LineChartSpec chart;
    chart.title = "Attention by offset, per layer (mean over heads)";
    chart.x_label = "offset j − i (key − query)";
    chart.y_label = "mean attention weight";
    chart.reference_y = 1.0 / s;
    chart.reference_label = "uniform 1/S";
    const size_t plane = static_cast<size_t>(s) * s;
    for (int64_t l = 0; l < maps.shape[0]; ++l) {
      std::vector<double> sum(2 * s - 1, 0.0);
      for (int64_t h = 0; h < maps.shape[1]; ++h) {
        const auto begin =
            maps.values.begin() + (l * maps.shape[1] + h) * plane;
        const std::vector<double> by_offset =
            MeanByOffset({begin, begin + plane}, s);
        for (size_t k = 0; k < sum.size(); ++k) {
          sum[k] += by_offset[k] / maps.shape[1];
        }
      }
      chart.series.push_back({"layer " + std::to_string(l), Offsets(s), sum});
    }
    out += LineChartHtml(chart);
  }
  return out + "</div>";
}

std::string AttentionStatistics(const ModelDiagnosis& model) {
  const DiagnoseResponse& d = model.diagnosis;
  if (d.attention_stats_size() == 0) {
    return Paragraph("missing", "The server returned no attention statistics.");
  }
  const int layers = model.info.num_layers();
  const int heads = model.info.num_heads();
  const double s = d.token_labels_size();
  BarChartSpec entropy;
  entropy.title = "Entropy per head";
  entropy.y_label = "nats";
  BarChartSpec distance;
  distance.title = "Mean attention distance per head";
  distance.y_label = "|i − j|";
  entropy.reference_y = d.uniform_entropy();
  entropy.reference_label =
      "uniform: ln S = " + FormatNumber(d.uniform_entropy());
  distance.reference_y = (s * s - 1) / (3 * s);
  distance.reference_label = "uniform: " + FormatNumber(*distance.reference_y);
  for (int l = 0; l < layers; ++l) {
    entropy.group_labels.push_back("layer " + std::to_string(l));
    distance.group_labels.push_back("layer " + std::to_string(l));
    entropy.values.emplace_back(heads, std::nan(""));
    distance.values.emplace_back(heads, std::nan(""));
  }
  std::string rows;
  for (const AttentionHeadStats& h : d.attention_stats()) {
    if (h.layer() >= 0 && h.layer() < layers && h.head() >= 0 &&
        h.head() < heads) {
      entropy.values[h.layer()][h.head()] = h.entropy();
      distance.values[h.layer()][h.head()] = h.mean_distance();
    }
    rows += "<tr><td>" + std::to_string(h.layer()) + "</td><td>" +
            std::to_string(h.head()) + "</td>";
    for (double v :
         {h.entropy(), h.entropy() / d.uniform_entropy(), h.mean_distance(),
          h.self_mass(), h.prev_mass(), h.next_mass(), h.first_mass()}) {
      rows += "<td>" + FormatNumber(v) + "</td>";
    }
    rows += "</tr>";
  }
  std::string out = "<div class=\"row\">" + BarChartHtml(entropy) +
                    BarChartHtml(distance) + "</div>";
  out +=
      "<details><summary>Numbers per layer and head</summary><table "
      "class=\"stats\"><thead><tr><th>layer</th><th>head</th>"
      "<th>entropy</th><th>entropy / ln S</th><th>mean distance</th>"
      "<th>self</th><th>previous</th><th>next</th><th>first</th></tr>"
      "</thead><tbody>" +
      rows + "</tbody></table></details>";
  return out;
}

std::string VerdictBox(std::string_view probe, bool present, bool yes,
                       std::string_view yes_text, std::string_view no_text,
                       double error, double tolerance,
                       std::string_view verdict) {
  if (!present) {
    return "<div class=\"verdict\"><b>" + EscapeHtml(probe) +
           "</b> not reported</div>";
  }
  return "<div class=\"verdict " + std::string(yes ? "yes" : "no") + "\"><b>" +
         EscapeHtml(probe) + ": " + EscapeHtml(yes ? yes_text : no_text) +
         "</b><span>max token error " + FormatNumber(error) + " (tolerance " +
         FormatNumber(tolerance) + ")</span><small>" + EscapeHtml(verdict) +
         "</small></div>";
}

}  // namespace

std::vector<std::string> DisplayLabels(const DiagnoseResponse& d) {
  std::vector<std::string> labels;
  for (const std::string& label : d.token_labels()) {
    if (label == " ") {
      labels.push_back("\u2423");
    } else if (label.size() > 7) {
      labels.push_back(label.substr(0, 6) + "\u2026");
    } else {
      labels.push_back(label);
    }
  }
  return labels;
}

std::vector<double> MeanByOffset(const std::vector<double>& matrix, int n) {
  std::vector<double> out(n > 0 ? 2 * n - 1 : 0, std::nan(""));
  if (matrix.size() < static_cast<size_t>(n) * n) return out;
  for (int k = -(n - 1); k <= n - 1; ++k) {
    double sum = 0;
    int count = 0;
    for (int i = std::max(0, -k); i < n && i + k < n; ++i) {
      sum += matrix[static_cast<size_t>(i) * n + i + k];
      ++count;
    }
    if (count > 0) out[k + n - 1] = sum / count;
  }
  return out;
}

std::string ModelSectionHtml(const ModelDiagnosis& model, size_t index,
                             int32_t max_layers, int32_t max_heads) {
  const encoder::v1::ModelInfo& info = model.info;
  const DiagnoseResponse& d = model.diagnosis;
  std::string hooks;
  for (const std::string& hook : info.positional().hooks()) {
    hooks += (hooks.empty() ? "" : ", ") + hook;
  }
  std::string facts =
      std::to_string(info.num_layers()) + " layers · " +
      std::to_string(info.num_heads()) + " heads · d_model " +
      std::to_string(info.d_model()) +
      " · position enters at: " + (hooks.empty() ? "nowhere" : hooks) +
      " · longer inputs than trained: " +
      (info.positional().extrapolates() ? "yes" : "no") +
      " · weights: " + info.weights();
  std::string out = "<section class=\"model\" id=\"m" + std::to_string(index) +
                    "\" data-model=\"" + EscapeHtml(d.model()) + "\"><h2>" +
                    EscapeHtml(d.model()) + " <span class=\"scheme\">" +
                    EscapeHtml(d.scheme()) + "</span></h2>" +
                    Paragraph("facts", facts) + "<div class=\"verdicts\">";
  out += VerdictBox("Permutation", d.has_permutation(),
                    d.permutation().equivariant(), "equivariant",
                    "not equivariant", d.permutation().max_token_error(),
                    d.permutation().tolerance(), d.permutation().verdict());
  out += VerdictBox(
      "Shift", d.has_shift(), d.shift().relative_only(),
      "invariant (outputs unchanged)", "not invariant (outputs changed)",
      d.shift().max_token_error(), d.shift().tolerance(), d.shift().verdict());
  out += "</div><h3>Attention maps</h3>" +
         AttentionGrid(model, max_layers, max_heads);
  out += "<h3>Positional matrix</h3>" + PositionalMatrix(model);
  out += "<h3>Distance profiles</h3>" + DistanceProfiles(model);
  out += "<h3>Attention statistics</h3>" + AttentionStatistics(model);
  return out + "</section>";
}

}  // namespace encoder_client

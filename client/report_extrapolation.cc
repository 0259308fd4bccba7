#include "client/report_extrapolation.h"

#include <algorithm>
#include <string>
#include <vector>

#include "client/html_writer.h"
#include "client/svg_charts.h"

namespace encoder_client {
namespace {

double LayerMean(const google::protobuf::RepeatedField<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / values.size();
}

std::string Join(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out.empty() ? "none" : out;
}

// What the scheme's parameters say about lengths, as HTML.
std::string ReachHtml(const encoder::v1::ExtrapolationProbe& e) {
  std::string out;
  if (e.max_length() > 0) {
    out += "cannot represent inputs past " + std::to_string(e.max_length()) +
           " tokens";
  }
  if (e.alibi_windows_size() > 0) {
    const auto [lo, hi] =
        std::minmax_element(e.alibi_windows().begin(), e.alibi_windows().end());
    out +=
        "ALiBi windows (weight \u00d7 10\u207b\u00b3): " + FormatNumber(*lo) +
        " to " + FormatNumber(*hi) + " tokens";
  }
  if (e.bucket_saturation_distance() > 0) {
    out += "buckets saturate at distance " +
           std::to_string(e.bucket_saturation_distance()) + " (" +
           std::to_string(e.num_buckets()) + " buckets, max_distance " +
           std::to_string(e.max_distance()) + ")";
  }
  if (e.wavelengths_size() > 0) {
    out += "wavelengths " + FormatNumber(e.wavelengths(0)) + " to " +
           FormatNumber(e.wavelengths(e.wavelengths_size() - 1)) + "; " +
           std::to_string(e.pairs_beyond_trained()) + " of " +
           std::to_string(e.wavelengths_size()) +
           " pairs longer than the trained length";
  }
  return out.empty() ? "no positional parameters" : EscapeHtml(out);
}

// What the server measured at load for its long-input policy auto
// (ModelInfo.measured_reach), as HTML.
std::string MeasuredHtml(const encoder::v1::ModelInfo& info) {
  if (!info.has_measured_reach()) return "not measured";
  const encoder::v1::MeasuredReach& m = info.measured_reach();
  const std::string broke = m.breaks_at() > 0 && m.drifts_size() > 0
                                ? FormatNumber(m.drifts(m.drifts_size() - 1)) +
                                      " at " + std::to_string(m.breaks_at())
                                : "";
  std::string out;
  if (m.holds_up_to() > m.reference_length()) {
    out = "whole up to " + std::to_string(m.holds_up_to()) +
          " tokens (pooled drift \u2264 " + FormatNumber(m.max_drift()) +
          " of its " + std::to_string(m.reference_length()) + "-token value)" +
          (broke.empty() ? "" : "; " + broke);
  } else {
    out = "windows past " + std::to_string(m.reference_length()) +
          " tokens (pooled drift " + broke + ", over " +
          FormatNumber(m.max_drift()) + ")";
  }
  return EscapeHtml(out);
}

std::string ReachRow(const ModelDiagnosis& m) {
  const encoder::v1::ExtrapolationProbe& e = *m.extrapolation;
  std::vector<int> ran, skipped;
  for (const auto& p : e.points()) {
    (p.ran() ? ran : skipped).push_back(p.length());
  }
  return "<tr><td>" + EscapeHtml(m.info.name()) + "</td><td>" +
         EscapeHtml(m.info.positional().scheme()) + "</td><td class=\"num\">" +
         std::to_string(e.trained_length()) + "</td><td class=\"num\">" +
         Join(ran) + "</td><td class=\"num\">" + Join(skipped) + "</td><td>" +
         ReachHtml(e) + "</td><td>" + MeasuredHtml(m.info) + "</td></tr>";
}

}  // namespace

const std::vector<ExtrapolationMeasure>& ExtrapolationMeasures() {
  static const std::vector<ExtrapolationMeasure> measures = {
      {"Attention entropy / ln S", "mean over layers",
       [](const encoder::v1::ExtrapolationPoint& p) {
         return LayerMean(p.relative_entropy());
       }},
      {"Mean attention distance / S", "mean over layers",
       [](const encoder::v1::ExtrapolationPoint& p) {
         return LayerMean(p.mean_distance()) / std::max(1, p.length());
       }},
      {"Attention mass on the first token", "mean over layers",
       [](const encoder::v1::ExtrapolationPoint& p) {
         return LayerMean(p.first_mass());
       }},
      {"Pooled embedding drift", "relative to the shortest length",
       [](const encoder::v1::ExtrapolationPoint& p) {
         return p.pooled_drift();
       }},
      {"Prefix token drift", "relative to the shortest length",
       [](const encoder::v1::ExtrapolationPoint& p) {
         return p.prefix_drift();
       }},
  };
  return measures;
}

std::string ExtrapolationSectionHtml(
    const std::vector<ModelDiagnosis>& models) {
  std::vector<const ModelDiagnosis*> probed;
  for (const ModelDiagnosis& m : models) {
    if (m.extrapolation.has_value()) probed.push_back(&m);
  }
  if (probed.empty()) return "";
  std::string html =
      "<section id=\"extrapolation\"><h3>Extrapolation</h3><p class=\"hint\">"
      "The input repeated to each length, on a grid from short to past each "
      "model's trained length. The x axis is the length divided by the "
      "model's trained length (1 = trained length), so every model shares "
      "it. Lengths a scheme cannot represent are not run (see the table). "
      "Drifts compare with the shortest length.</p><div class=\"row\">";
  for (const ExtrapolationMeasure& measure : ExtrapolationMeasures()) {
    LineChartSpec spec;
    spec.title = measure.title;
    spec.x_label = "length / trained length";
    spec.y_label = measure.y_label;
    for (const ModelDiagnosis* m : probed) {
      ChartSeries series;
      series.name = m->info.name();
      const double trained = std::max(1, m->extrapolation->trained_length());
      for (const auto& p : m->extrapolation->points()) {
        if (!p.ran()) continue;
        series.x.push_back(p.length() / trained);
        series.y.push_back(measure.value(p));
      }
      if (!series.x.empty()) spec.series.push_back(std::move(series));
    }
    if (std::string(measure.title).find("entropy") != std::string::npos) {
      spec.reference_y = 1.0;
      spec.reference_label = "uniform attention";
    }
    html += LineChartHtml(spec);
  }
  html +=
      "</div><table class=\"summary\"><thead><tr><th>Model</th>"
      "<th>Scheme</th><th>Trained length</th><th>Lengths run</th>"
      "<th>Not run</th><th>What the parameters allow</th>"
      "<th>Measured at load (long input auto)</th></tr></thead>"
      "<tbody>";
  for (const ModelDiagnosis* m : probed) html += ReachRow(*m);
  return html + "</tbody></table></section>";
}

}  // namespace encoder_client

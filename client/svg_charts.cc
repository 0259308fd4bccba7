#include "client/svg_charts.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "client/html_writer.h"

namespace encoder_client {
namespace {

constexpr std::array<const char*, 10> kPalette = {
    "#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1",
    "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#7f7f7f"};

// A padded axis range [low, high] with round tick steps.
struct Axis {
  double low;
  double high;
  double step;
};

Axis NiceAxis(double low, double high, int target_ticks) {
  if (!std::isfinite(low) || !std::isfinite(high)) return {0, 1, 0.25};
  if (high <= low) {
    const double pad = low == 0 ? 1.0 : std::abs(low) * 0.1;
    low -= pad;
    high += pad;
  }
  const double raw = (high - low) / target_ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double step = (norm < 1.5 ? 1
                       : norm < 3 ? 2
                       : norm < 7 ? 5
                                  : 10) *
                      magnitude;
  return {std::floor(low / step + 1e-9) * step,
          std::ceil(high / step - 1e-9) * step, step};
}

// Maps data coordinates into a plot rectangle.
struct Frame {
  double left, top, width, height;
  Axis x, y;
  double X(double v) const {
    return left + (v - x.low) / (x.high - x.low) * width;
  }
  double Y(double v) const {
    return top + height - (v - y.low) / (y.high - y.low) * height;
  }
};

// The plot area of a chart of `width` x `height` pixels, leaving room for
// the title above and tick labels and axis titles left and below.
Frame ChartFrame(int width, int height, const Axis& x, const Axis& y) {
  Frame f;
  f.left = 56;
  f.top = 26;
  f.width = width - 68.0;
  f.height = height - 68.0;
  f.x = x;
  f.y = y;
  return f;
}

// Grid lines, ticks, tick labels and axis titles of `frame`. Without
// `x_ticks` no x ticks are drawn (the caller labels the x axis itself).
std::string AxesSvg(const Frame& f, bool x_ticks, std::string_view x_label,
                    std::string_view y_label) {
  std::string out = "<g class=\"axes\" font-size=\"10\" fill=\"#555\">";
  for (double v = f.y.low; v <= f.y.high + f.y.step * 1e-6; v += f.y.step) {
    const double tick = std::abs(v) < f.y.step * 1e-9 ? 0.0 : v;
    out += "<line x1=\"" + SvgNumber(f.left) + "\" x2=\"" +
           SvgNumber(f.left + f.width) + "\" y1=\"" + SvgNumber(f.Y(tick)) +
           "\" y2=\"" + SvgNumber(f.Y(tick)) +
           "\" stroke=\"#e6e6e6\"/><text x=\"" + SvgNumber(f.left - 4) +
           "\" y=\"" + SvgNumber(f.Y(tick)) +
           "\" dy=\"0.35em\" text-anchor=\"end\">" + FormatNumber(tick) +
           "</text>";
  }
  if (x_ticks) {
    const double first = std::ceil(f.x.low / f.x.step - 1e-9) * f.x.step;
    for (double v = first; v <= f.x.high + f.x.step * 1e-6; v += f.x.step) {
      const double tick = std::abs(v) < f.x.step * 1e-9 ? 0.0 : v;
      out += "<text x=\"" + SvgNumber(f.X(tick)) + "\" y=\"" +
             SvgNumber(f.top + f.height + 13) + "\" text-anchor=\"middle\">" +
             FormatNumber(tick) + "</text>";
    }
  }
  out += "<rect x=\"" + SvgNumber(f.left) + "\" y=\"" + SvgNumber(f.top) +
         "\" width=\"" + SvgNumber(f.width) + "\" height=\"" +
         SvgNumber(f.height) + "\" fill=\"none\" stroke=\"#999\"/>";
  out += "<text x=\"" + SvgNumber(f.left + f.width / 2) + "\" y=\"" +
         SvgNumber(f.top + f.height + 30) +
         "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#333\">" +
         EscapeHtml(x_label) + "</text>";
  out += "<text transform=\"translate(12 " + SvgNumber(f.top + f.height / 2) +
         ") rotate(-90)\" text-anchor=\"middle\" font-size=\"11\" "
         "fill=\"#333\">" +
         EscapeHtml(y_label) + "</text></g>";
  return out;
}

// A dashed horizontal line at `y` across the plot area.
std::string ReferenceLineSvg(const Frame& f, double y) {
  return "<line x1=\"" + SvgNumber(f.left) + "\" x2=\"" +
         SvgNumber(f.left + f.width) + "\" y1=\"" + SvgNumber(f.Y(y)) +
         "\" y2=\"" + SvgNumber(f.Y(y)) +
         "\" stroke=\"#222\" stroke-dasharray=\"5 3\"/>";
}

// The legend under a chart: a colored swatch per name, then the dashed
// reference line's label when there is one.
std::string KeysHtml(const std::vector<std::string>& names,
                     std::string_view reference_label) {
  std::string out = "<div class=\"keys\">";
  for (size_t k = 0; k < names.size(); ++k) {
    out += "<span><i style=\"background:" + SeriesColor(k) + "\"></i>" +
           EscapeHtml(names[k]) + "</span>";
  }
  if (!reference_label.empty()) {
    out += "<span><i class=\"dashed\"></i>" + EscapeHtml(reference_label) +
           "</span>";
  }
  return out + "</div>";
}

std::string ChartOpen(int width, int height, std::string_view title) {
  return "<figure class=\"chart\"><svg width=\"" + std::to_string(width) +
         "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
         std::to_string(width) + " " + std::to_string(height) +
         "\" role=\"img\"><text x=\"4\" y=\"15\" font-size=\"12\" "
         "font-weight=\"600\" fill=\"#222\">" +
         EscapeHtml(title) + "</text>";
}

}  // namespace

std::string SeriesColor(size_t index) {
  return kPalette[index % kPalette.size()];
}

std::string LineChartHtml(const LineChartSpec& spec) {
  double x_low = std::numeric_limits<double>::infinity();
  double x_high = -x_low;
  double y_low = x_low;
  double y_high = -x_low;
  for (const ChartSeries& s : spec.series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x_low = std::min(x_low, s.x[i]);
      x_high = std::max(x_high, s.x[i]);
      y_low = std::min(y_low, s.y[i]);
      y_high = std::max(y_high, s.y[i]);
    }
  }
  if (spec.reference_y.has_value() && std::isfinite(*spec.reference_y)) {
    y_low = std::min(y_low, *spec.reference_y);
    y_high = std::max(y_high, *spec.reference_y);
  }
  Frame f = ChartFrame(spec.width, spec.height, NiceAxis(x_low, x_high, 6),
                       NiceAxis(y_low, y_high, 5));
  if (x_high > x_low) {  // the x axis spans the data exactly
    f.x.low = x_low;
    f.x.high = x_high;
  }
  std::string out = ChartOpen(spec.width, spec.height, spec.title);
  out += AxesSvg(f, true, spec.x_label, spec.y_label);
  const bool reference =
      spec.reference_y.has_value() && std::isfinite(*spec.reference_y);
  if (reference) out += ReferenceLineSvg(f, *spec.reference_y);
  for (size_t k = 0; k < spec.series.size(); ++k) {
    const ChartSeries& s = spec.series[k];
    const std::string color = SeriesColor(k);
    std::string points;
    auto flush = [&]() {
      if (!points.empty()) {
        out += "<polyline fill=\"none\" stroke=\"" + color +
               "\" stroke-width=\"1.6\" points=\"" + points + "\"/>";
      }
      points.clear();
    };
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) {
        flush();
        continue;
      }
      if (!points.empty()) points += ' ';
      points += SvgNumber(f.X(s.x[i])) + "," + SvgNumber(f.Y(s.y[i]));
    }
    flush();
  }
  out += "</svg>";
  if (spec.series.size() > 1 || reference) {
    std::vector<std::string> names;
    if (spec.series.size() > 1) {
      for (const ChartSeries& series : spec.series) {
        names.push_back(series.name);
      }
    }
    out += KeysHtml(names, reference ? spec.reference_label : "");
  }
  return out + "</figure>";
}

std::string BarChartHtml(const BarChartSpec& spec) {
  double y_low = 0;
  double y_high = 0;
  size_t slots = 0;
  for (const std::vector<double>& group : spec.values) {
    slots += group.size() + 1;
    for (double v : group) {
      if (!std::isfinite(v)) continue;
      y_low = std::min(y_low, v);
      y_high = std::max(y_high, v);
    }
  }
  const bool reference =
      spec.reference_y.has_value() && std::isfinite(*spec.reference_y);
  if (reference) {
    y_high = std::max(y_high, *spec.reference_y);
    y_low = std::min(y_low, *spec.reference_y);
  }
  const Frame f = ChartFrame(spec.width, spec.height, Axis{0, 1, 1},
                             NiceAxis(y_low, y_high, 5));
  std::string out = ChartOpen(spec.width, spec.height, spec.title);
  out += AxesSvg(f, false, "", spec.y_label);
  const double slot = f.width / std::max<size_t>(slots, 1);
  double x = f.left + slot / 2;
  for (size_t g = 0; g < spec.values.size(); ++g) {
    const std::vector<double>& group = spec.values[g];
    const double group_start = x;
    for (size_t b = 0; b < group.size(); ++b, x += slot) {
      const double v = std::isfinite(group[b]) ? group[b] : 0.0;
      const double y0 = f.Y(0);
      const double y1 = f.Y(v);
      out +=
          "<rect x=\"" + SvgNumber(x + slot * 0.1) + "\" y=\"" +
          SvgNumber(std::min(y0, y1)) + "\" width=\"" + SvgNumber(slot * 0.8) +
          "\" height=\"" + SvgNumber(std::abs(y1 - y0)) + "\" fill=\"" +
          SeriesColor(g) + "\"><title>" +
          EscapeHtml(g < spec.group_labels.size() ? spec.group_labels[g] : "") +
          " #" + std::to_string(b) + ": " + FormatNumber(group[b]) +
          "</title></rect>";
      if (slot >= 7) {
        out += "<text x=\"" + SvgNumber(x + slot / 2) + "\" y=\"" +
               SvgNumber(f.top + f.height + 10) +
               "\" font-size=\"8\" fill=\"#777\" text-anchor=\"middle\">" +
               std::to_string(b) + "</text>";
      }
    }
    if (g < spec.group_labels.size()) {
      out += "<text x=\"" + SvgNumber((group_start + x) / 2) + "\" y=\"" +
             SvgNumber(f.top + f.height + 24) +
             "\" font-size=\"11\" fill=\"#333\" text-anchor=\"middle\">" +
             EscapeHtml(spec.group_labels[g]) + "</text>";
    }
    x += slot;
  }
  if (!reference) return out + "</svg></figure>";
  return out + ReferenceLineSvg(f, *spec.reference_y) + "</svg>" +
         KeysHtml({}, spec.reference_label) + "</figure>";
}

}  // namespace encoder_client

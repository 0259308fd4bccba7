#include "client/html_writer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

namespace encoder_client {
namespace {

using Rgb = std::array<double, 3>;

// Five evenly spaced stops of each scale.
constexpr std::array<Rgb, 5> kSequentialStops = {{{247, 251, 255},
                                                  {198, 219, 239},
                                                  {107, 174, 214},
                                                  {33, 113, 181},
                                                  {8, 48, 107}}};
constexpr std::array<Rgb, 5> kDivergingStops = {{{33, 102, 172},
                                                 {146, 197, 222},
                                                 {247, 247, 247},
                                                 {244, 165, 130},
                                                 {178, 24, 43}}};
constexpr const char* kMissingColor = "#bdbdbd";

std::string Hex(const Rgb& rgb) {
  char out[8];
  std::snprintf(out, sizeof(out), "#%02x%02x%02x",
                static_cast<int>(std::lround(rgb[0])),
                static_cast<int>(std::lround(rgb[1])),
                static_cast<int>(std::lround(rgb[2])));
  return out;
}

Rgb Interpolate(const std::array<Rgb, 5>& stops, double t) {
  t = std::clamp(t, 0.0, 1.0) * (stops.size() - 1);
  const size_t i = std::min(static_cast<size_t>(t), stops.size() - 2);
  const double f = t - i;
  Rgb out;
  for (int c = 0; c < 3; ++c) {
    out[c] = stops[i][c] + (stops[i + 1][c] - stops[i][c]) * f;
  }
  return out;
}

// Code points in UTF-8 `text` (continuation bytes not counted).
int DisplayLength(std::string_view text) {
  int n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string SvgNumber(double value) {
  return FormatNumber(std::round(value * 10) / 10, 6);
}

std::string FormatNumber(double value, int digits) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return "0";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
  std::string text = buffer;
  const size_t e = text.find('e');
  if (e == std::string::npos) return text;
  // "1.5e-07" -> "1.5e-7", "1e+05" -> "1e5".
  std::string mantissa = text.substr(0, e);
  std::string exponent = text.substr(e + 1);
  const bool negative = exponent[0] == '-';
  exponent.erase(0, exponent.find_first_not_of("+-0"));
  return mantissa + "e" + (negative ? "-" : "") + exponent;
}

ColorScale ColorScale::Sequential(double low, double high, double gamma) {
  if (!(high > low)) high = low + 1;
  return ColorScale(false, low, high, gamma > 0 ? gamma : 1.0);
}

ColorScale ColorScale::Diverging(double limit) {
  if (!(limit > 0) || !std::isfinite(limit)) limit = 1;
  return ColorScale(true, -limit, limit, 1.0);
}

double ColorScale::Position(double value) const {
  if (!std::isfinite(value)) return std::numeric_limits<double>::quiet_NaN();
  return std::pow(std::clamp((value - low_) / (high_ - low_), 0.0, 1.0),
                  gamma_);
}

std::string ColorScale::ColorAt(double position) const {
  if (std::isnan(position)) return kMissingColor;
  return Hex(
      Interpolate(diverging_ ? kDivergingStops : kSequentialStops, position));
}

std::string ColorScale::Color(double value) const {
  return ColorAt(Position(value));
}

double ColorScale::ValueAt(double position) const {
  return low_ + (high_ - low_) *
                    std::pow(std::clamp(position, 0.0, 1.0), 1.0 / gamma_);
}

std::string LegendSvg(const ColorScale& scale, std::string_view caption) {
  constexpr int kSteps = 60;
  constexpr int kBarWidth = 240;
  constexpr int kLeft = 18;
  std::string out =
      "<svg class=\"legend\" width=\"280\" height=\"50\" viewBox=\"0 0 280 "
      "50\"><text x=\"" +
      std::to_string(kLeft) + "\" y=\"11\" font-size=\"11\" fill=\"#333\">" +
      EscapeHtml(caption) + "</text><g shape-rendering=\"crispEdges\">";
  for (int i = 0; i < kSteps; ++i) {
    const double x = kLeft + kBarWidth * static_cast<double>(i) / kSteps;
    out += "<rect x=\"" + SvgNumber(x) + "\" y=\"16\" width=\"" +
           SvgNumber(kBarWidth / static_cast<double>(kSteps) + 0.5) +
           "\" height=\"12\" fill=\"" + scale.ColorAt((i + 0.5) / kSteps) +
           "\"/>";
  }
  out += "</g><g font-size=\"10\" fill=\"#444\" text-anchor=\"middle\">";
  for (int i = 0; i <= 4; ++i) {
    const double x = kLeft + kBarWidth * i / 4.0;
    out += "<line x1=\"" + SvgNumber(x) + "\" x2=\"" + SvgNumber(x) +
           "\" y1=\"28\" y2=\"32\" stroke=\"#444\"/><text x=\"" + SvgNumber(x) +
           "\" y=\"44\">" + FormatNumber(scale.ValueAt(i / 4.0)) + "</text>";
  }
  return out + "</g></svg>";
}

std::string HeatmapSvg(const HeatmapSpec& spec) {
  constexpr int kLevels = 64;
  const int cell = std::max(1, spec.cell_px);
  const double font = std::clamp(cell + 1.0, 7.0, 11.0);
  const double char_width = 0.62 * font;
  // Draw every k-th label when rows are lower than the text.
  const int every = std::max(1, static_cast<int>(std::ceil(0.8 * font / cell)));
  auto drawn = [&](const std::vector<std::string>& labels, int i) {
    return i < static_cast<int>(labels.size()) && i % every == 0 &&
           !labels[i].empty();
  };
  // Room of column label j: the distance to its nearest drawn neighbour.
  std::vector<int> drawn_cols;
  for (int j = 0; j < spec.cols; ++j) {
    if (drawn(spec.col_labels, j)) drawn_cols.push_back(j);
  }
  std::vector<bool> upright(spec.cols, false);
  int upright_chars = 0;
  for (size_t k = 0; k < drawn_cols.size(); ++k) {
    int gap = spec.cols;
    if (k > 0) gap = std::min(gap, drawn_cols[k] - drawn_cols[k - 1]);
    if (k + 1 < drawn_cols.size()) {
      gap = std::min(gap, drawn_cols[k + 1] - drawn_cols[k]);
    }
    const int n = DisplayLength(spec.col_labels[drawn_cols[k]]);
    if (n * char_width > gap * cell + 1) {
      upright[drawn_cols[k]] = true;
      upright_chars = std::max(upright_chars, n);
    }
  }
  int row_label_chars = 0;
  for (int i = 0; i < spec.rows; ++i) {
    if (drawn(spec.row_labels, i)) {
      row_label_chars =
          std::max(row_label_chars, DisplayLength(spec.row_labels[i]));
    }
  }
  const int left =
      static_cast<int>(std::ceil(row_label_chars * char_width)) + 5;
  const int top = drawn_cols.empty()
                      ? 2
                      : static_cast<int>(std::ceil(std::max(
                            font + 4, upright_chars * char_width + 5)));
  const int width = left + spec.cols * cell + 2;
  const int height = top + spec.rows * cell + 2;

  std::string out =
      "<svg " + spec.attributes + " width=\"" + std::to_string(width) +
      "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
      std::to_string(width) + " " + std::to_string(height) +
      "\" role=\"img\"><title>" + EscapeHtml(spec.title) + "</title>";
  // One path per quantized color; the last one collects missing values.
  std::vector<std::string> paths(kLevels + 1);
  for (int i = 0; i < spec.rows; ++i) {
    for (int j = 0; j < spec.cols; ++j) {
      const size_t k = static_cast<size_t>(i) * spec.cols + j;
      const double position = k < spec.values.size()
                                  ? spec.scale.Position(spec.values[k])
                                  : std::numeric_limits<double>::quiet_NaN();
      const int level =
          std::isnan(position)
              ? kLevels
              : static_cast<int>(std::lround(position * (kLevels - 1)));
      paths[level] +=
          "M" + std::to_string(j) + " " + std::to_string(i) + "h1v1h-1";
    }
  }
  out += "<g class=\"cells\" transform=\"translate(" + std::to_string(left) +
         " " + std::to_string(top) + ") scale(" + std::to_string(cell) +
         ")\" shape-rendering=\"crispEdges\">";
  for (int level = 0; level <= kLevels; ++level) {
    if (paths[level].empty()) continue;
    out += "<path fill=\"" +
           (level == kLevels ? std::string(kMissingColor)
                             : spec.scale.ColorAt(level / (kLevels - 1.0))) +
           "\" d=\"" + paths[level] + "\"/>";
  }
  out += "</g><rect x=\"" + SvgNumber(left - 0.5) + "\" y=\"" +
         SvgNumber(top - 0.5) + "\" width=\"" +
         std::to_string(spec.cols * cell + 1) + "\" height=\"" +
         std::to_string(spec.rows * cell + 1) +
         "\" fill=\"none\" stroke=\"#aaa\" stroke-width=\"0.5\"/>";
  out += "<g class=\"labels\" font-size=\"" + SvgNumber(font) +
         "\" font-family=\"DejaVu Sans Mono,Menlo,Consolas,monospace\" "
         "fill=\"#333\">";
  for (int i = 0; i < spec.rows; ++i) {
    if (!drawn(spec.row_labels, i)) continue;
    out += "<text x=\"" + std::to_string(left - 3) + "\" y=\"" +
           SvgNumber(top + (i + 0.5) * cell) +
           "\" dy=\"0.35em\" text-anchor=\"end\">" +
           EscapeHtml(spec.row_labels[i]) + "</text>";
  }
  for (int j : drawn_cols) {
    const double x = left + (j + 0.5) * cell;
    const std::string label = EscapeHtml(spec.col_labels[j]);
    if (upright[j]) {
      out += "<text transform=\"translate(" + SvgNumber(x) + " " +
             std::to_string(top - 3) +
             ") rotate(-90)\" dy=\"0.35em\" text-anchor=\"start\">" + label +
             "</text>";
    } else {
      out += "<text x=\"" + SvgNumber(x) + "\" y=\"" + std::to_string(top - 3) +
             "\" text-anchor=\"middle\">" + label + "</text>";
    }
  }
  return out + "</g></svg>";
}

}  // namespace encoder_client

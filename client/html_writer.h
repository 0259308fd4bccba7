// Building blocks of self-contained HTML pages: escaping, compact number
// formatting, color scales, color legends and heatmaps as inline SVG. Every
// function returns markup that needs no script, style sheet or resource from
// elsewhere; text passed in is escaped here.
#ifndef ENCODER_CLIENT_HTML_WRITER_H_
#define ENCODER_CLIENT_HTML_WRITER_H_

#include <string>
#include <string_view>
#include <vector>

namespace encoder_client {

// `text` with &, <, >, " and ' replaced by character references: safe as
// element content and inside quoted attribute values.
std::string EscapeHtml(std::string_view text);

// `value` rounded to `digits` significant digits in its shortest form:
// "0.0123", "1.5e-7", "-3", "1.23e5"; "nan", "inf" and "-inf" when not
// finite.
std::string FormatNumber(double value, int digits = 3);

// An SVG coordinate or length: `value` rounded to one decimal.
std::string SvgNumber(double value);

// Maps numbers to "#rrggbb" colors. Values outside the scale's range take
// the color of the nearer end.
class ColorScale {
 public:
  // White at `low` to dark blue at `high`. Colors follow
  // ((value - low) / (high - low))^gamma, so gamma < 1 spreads small values.
  static ColorScale Sequential(double low, double high, double gamma = 1.0);
  // Blue at -limit, white at 0, red at +limit (limit > 0).
  static ColorScale Diverging(double limit);

  std::string Color(double value) const;
  // Where `value`'s color sits along the scale, in [0, 1]; NaN when the
  // value is not finite.
  double Position(double value) const;
  // The color at `position` in [0, 1] along the scale.
  std::string ColorAt(double position) const;
  // The value whose color sits at `position` in [0, 1] along the scale.
  double ValueAt(double position) const;

 private:
  ColorScale(bool diverging, double low, double high, double gamma)
      : diverging_(diverging), low_(low), high_(high), gamma_(gamma) {}

  bool diverging_;
  double low_;
  double high_;
  double gamma_;
};

// A color legend: a horizontal bar of the scale with five value ticks and
// `caption` above it.
std::string LegendSvg(const ColorScale& scale, std::string_view caption);

// A matrix drawn as a grid of colored squares.
struct HeatmapSpec {
  int rows = 0;
  int cols = 0;
  std::vector<double> values;  // rows * cols, row-major
  // Axis labels, one per row and column; empty strings are not drawn. An
  // empty vector draws no labels on that axis.
  std::vector<std::string> row_labels;
  std::vector<std::string> col_labels;
  int cell_px = 8;  // side of one square
  ColorScale scale = ColorScale::Sequential(0.0, 1.0);
  // Extra attributes of the <svg> element, already escaped, e.g.
  // `class="heatmap" data-layer="0"`.
  std::string attributes;
  std::string title;  // tooltip of the whole map
};

// An <svg> whose one <g class="cells"> holds a <path> per color (the scale
// quantized to 64 steps) and each entry's square as one subpath
// "M<col> <row>h1v1h-1" of its color's path; labels sit left of and above
// the grid (column labels wider than their room are turned upright).
std::string HeatmapSvg(const HeatmapSpec& spec);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_HTML_WRITER_H_

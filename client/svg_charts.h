// Line and bar charts as inline SVG inside a <figure class="chart">, with a
// legend as HTML below when needed. The markup needs no script or external
// resource; text passed in is escaped here.
#ifndef ENCODER_CLIENT_SVG_CHARTS_H_
#define ENCODER_CLIENT_SVG_CHARTS_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace encoder_client {

// One named line of a chart.
struct ChartSeries {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;  // same length as x
};

struct LineChartSpec {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<ChartSeries> series;    // colored in order of a fixed palette
  std::optional<double> reference_y;  // dashed horizontal line
  std::string reference_label;
  int width = 410;
  int height = 250;
};

// A <figure class="chart"> with the chart as <svg>; below it a legend
// naming each line's color when there are several, and the dashed
// reference line when there is one. The x axis spans the data exactly.
std::string LineChartHtml(const LineChartSpec& spec);

// Bars in labeled groups (e.g. one group per layer, one bar per head).
struct BarChartSpec {
  std::string title;
  std::string y_label;
  std::vector<std::string> group_labels;
  std::vector<std::vector<double>> values;  // [group][bar]
  std::optional<double> reference_y;
  std::string reference_label;
  int width = 410;
  int height = 250;
};

// A <figure class="chart"> with the bar chart; bars are colored by group and
// numbered within it, and the reference line's label is given below.
std::string BarChartHtml(const BarChartSpec& spec);

// The i-th color of the palette used for chart series (wraps around).
std::string SeriesColor(size_t index);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_SVG_CHARTS_H_

// The report subcommand: diagnoses one input on several models and writes
// one self-contained HTML page comparing them (attention heatmaps,
// positional matrices, distance profiles, verdicts and statistics). The page
// loads nothing from elsewhere and runs no script.
#ifndef ENCODER_CLIENT_REPORT_H_
#define ENCODER_CLIENT_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/connection.h"
#include "encoder/v1/encoder.pb.h"

namespace encoder_client {

// Input used when the command line names none.
inline constexpr char kDefaultReportText[] = "The cat sat on the mat.";

struct ReportOptions {
  std::string out;  // path of the HTML file to write
  // At most one input source; neither: kDefaultReportText.
  std::optional<std::string> text;
  std::optional<std::vector<int64_t>> ids;
  std::vector<std::string> models;   // empty: every served model, in order
  int32_t structure_positions = 32;  // N of the positional matrices
  int32_t max_layers = 0;            // heatmap grid rows; 0: all layers
  int32_t max_heads = 0;             // heatmap grid columns; 0: all heads
  // Also run the extrapolation probe (server's default grid, up to
  // `max_multiple` times the trained length; 0: the server's default).
  bool extrapolation = false;
  double max_multiple = 0;
  // Model sections in columns next to each other instead of one below
  // the other.
  bool side_by_side = false;
};

// What the page shows of one model.
struct ModelDiagnosis {
  encoder::v1::ModelInfo info;
  encoder::v1::DiagnoseResponse diagnosis;  // all probes, attention maps
  std::optional<encoder::v1::ExtrapolationProbe> extrapolation;
};

struct ReportData {
  std::string input_description;  // e.g. the quoted text
  std::string target;             // server address, shown in the header
  std::vector<ModelDiagnosis> models;
  int32_t max_layers = 0;  // as in ReportOptions
  int32_t max_heads = 0;
  bool side_by_side = false;
};

// The complete HTML document for `data`.
std::string RenderReport(const ReportData& data);

// Calls ListModels, then Diagnose (every probe, attention maps) on each
// selected model, and writes the page to options.out. Returns kExitOk, or
// kExitRpcError when a call fails (the file is then not written), or
// kExitUsage for an unknown model name or an unwritable output path.
int RunReport(const ConnectionOptions& connection,
              const ReportOptions& options);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_REPORT_H_

#include "client/report.h"

#include <algorithm>
#include <fstream>
#include <iostream>

#include "client/errors.h"
#include "client/html_writer.h"
#include "client/report_extrapolation.h"
#include "client/report_sections.h"
#include "encoder/v1/encoder.grpc.pb.h"

namespace encoder_client {
namespace {

constexpr char kStyle[] = R"css(
:root{--fg:#1f2328;--muted:#57606a;--line:#d0d7de;--panel:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;color:var(--fg);background:#fff;
 font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
main{max-width:1360px;margin:0 auto;padding:24px 28px 64px}
h1{font-size:26px;margin:0 0 4px}
h2{font-size:22px;margin:0 0 4px}
h3{font-size:16px;margin:24px 0 8px;padding-bottom:3px;
 border-bottom:1px solid var(--line)}
a{color:#0969da;text-decoration:none}
.meta,.facts,.hint,.note{color:var(--muted)}
.hint{margin:2px 0 6px}
nav{margin:10px 0 4px}nav a{margin-right:14px;font-weight:600}
.guide{display:grid;grid-template-columns:repeat(auto-fit,minmax(400px,1fr));
 gap:10px 18px}
.guide div{background:var(--panel);border:1px solid var(--line);
 border-radius:6px;padding:9px 14px}
.guide h4{margin:0 0 3px;font-size:14px}.guide p{margin:0}
table{border-collapse:collapse}
table.summary{width:100%;font-size:13px}
table.summary th,table.summary td{border-bottom:1px solid var(--line);
 padding:6px 8px;text-align:left;vertical-align:top}
table.summary thead th{background:var(--panel);font-weight:600}
.num{font-variant-numeric:tabular-nums;white-space:nowrap}
.badge{display:inline-block;padding:0 8px;border-radius:10px;font-size:12px;
 font-weight:600;white-space:nowrap}
.badge.yes,.verdict.yes b{color:#116329}.badge.yes{background:#dafbe1}
.badge.no,.verdict.no b{color:#953800}.badge.no{background:#fff1e5}
.side{display:grid;grid-auto-flow:column;
 grid-auto-columns:minmax(680px,1fr);gap:0 28px;overflow-x:auto}
section.model{margin-top:40px;padding-top:16px;border-top:3px solid #24292f}
.scheme{font-size:13px;font-weight:600;background:#ddf4ff;color:#0550ae;
 border-radius:10px;padding:2px 10px;vertical-align:middle}
.facts{margin:0 0 10px}
.verdicts{display:flex;gap:12px;flex-wrap:wrap}
.verdict{flex:1 1 440px;border:1px solid var(--line);border-radius:6px;
 border-left:5px solid #8c959f;padding:7px 12px}
.verdict.yes{border-left-color:#1a7f37}.verdict.no{border-left-color:#bc4c00}
.verdict b,.verdict span,.verdict small{display:block}
.verdict small{color:var(--muted)}
.hgrid-wrap{overflow-x:auto;padding-bottom:4px}
.hgrid{display:grid;gap:8px 12px;align-items:center}
.colhead{font-size:12px;font-weight:600;color:var(--muted);
 justify-self:center}
.rowhead{font-size:12px;font-weight:600;color:var(--muted);
 white-space:nowrap;position:sticky;left:0;z-index:1;background:#fff;
 padding:0 6px 0 0}
.row{display:flex;flex-wrap:wrap;gap:12px 24px;align-items:flex-start}
.row.tight{gap:10px 14px}
figure{margin:0}
figcaption{font-size:11px;color:var(--muted);text-align:center}
dl.figures{margin:8px 0 0;display:grid;grid-template-columns:auto auto;
 gap:2px 14px;align-content:start;width:max-content}
dl.figures div{display:contents}dt{color:var(--muted)}
dd{margin:0;font-variant-numeric:tabular-nums}
.keys{display:flex;flex-wrap:wrap;gap:0 12px;font-size:11px;color:#444;
 max-width:410px;padding-left:56px}
.keys i{display:inline-block;width:14px;height:3px;margin-right:4px;
 vertical-align:middle}
.keys i.dashed{height:0;border-top:2px dashed #222}
details{margin-top:8px}summary{cursor:pointer;color:#0969da}
table.stats{font-size:12px;margin-top:6px}
table.stats th,table.stats td{padding:2px 10px;text-align:right;
 border-bottom:1px solid #eaeef2;font-variant-numeric:tabular-nums}
.nosignal,.missing{background:var(--panel);border:1px dashed #afb8c1;
 border-radius:6px;padding:14px 18px;color:var(--muted);max-width:720px}
)css";

// Plain-language explanations, one box per concept: {title, text}.
constexpr const char* kGuide[][2] = {
    {"What this page compares",
     "Every model here is the same kind of Transformer encoder; they differ "
     "only in how they are told where each token sits in the sequence (the "
     "positional scheme). All were given the same input and put through "
     "the same tests. Text becomes tokens through each model's own "
     "tokenizer (the built-in models take one token per byte, framed by "
     "[CLS] and [SEP]); on heatmap axes a space is drawn as \u2423. Models "
     "whose weights are \"seed:N\" are randomly initialized, so their "
     "attention shows what each scheme does by construction, not what "
     "training taught it; checkpoints show what training made of theirs."},
    {"Permutation equivariance",
     "Shuffle the input tokens, run the model, then put the outputs back in "
     "the original order. If that matches the outputs for the unshuffled "
     "input, the model is permutation equivariant: it sees the input as a "
     "bag of tokens and cannot tell their order. Only a model without "
     "positional information should be. The number is the largest "
     "difference found (max token error)."},
    {"Shift invariance",
     "Run the model again with every position number increased by the same "
     "offset (positions c, c+1, ... instead of 0, 1, ...). If the outputs do "
     "not change, the model only uses how far apart tokens are (relative "
     "position), never where they are (absolute position). Expected for "
     "RoPE, ALiBi and relative bias; not for sinusoidal or learned codes."},
    {"Attention heatmaps",
     "One small square per layer and head. Row i is the token doing the "
     "looking (query), column j the token looked at (key); the darker cell "
     "(i, j), the more attention token i pays to token j (each row sums to "
     "1). A dark diagonal: tokens attend to themselves. A band beside it: "
     "to their neighbours. A dark column: everyone attends to one token. An "
     "even tint: uniform attention with no positional preference."},
    {"Gram matrix (sinusoidal, learned)",
     "These schemes add a position vector PE(p) to each token. Cell (m, n) "
     "is PE(m)\u00b7PE(n), how alike the codes of positions m and n are. If "
     "it depends only on the distance n \u2212 m, every diagonal has one "
     "color; Toeplitz deviation measures how far it is from that. Min code "
     "distance is the closest two different positions come (0 would make "
     "them indistinguishable). Shift residual k: how well one fixed linear "
     "map turns PE(p) into PE(p+k) for every p (0 = perfectly)."},
    {"Relativity table (RoPE)",
     "RoPE rotates queries and keys by angles set by their positions. Cell "
     "(m, n) is the score between one fixed query placed at m and one fixed "
     "key placed at n. When only n \u2212 m matters, diagonals are constant "
     "(relativity deviation \u2248 0), and rotation keeps vector lengths "
     "(norm ratio deviation \u2248 0)."},
    {"Bias matrix (ALiBi, relative)",
     "These schemes add a number b(i, j) to the attention score of query i "
     "and key j, one matrix per head. Blue lowers attention. ALiBi uses "
     "\u2212slope\u00b7|i \u2212 j|, a penalty growing with distance, with "
     "its own slope per head; learned relative bias may treat left and "
     "right differently (not symmetric)."},
    {"Distance profiles",
     "The positional matrix averaged along its diagonals: how similarity, "
     "score or bias changes with the distance between two positions. The "
     "attention profile shows, per layer, how much attention goes to the "
     "token at each offset (negative: earlier tokens); the dashed line is "
     "what uniform attention would give."},
    {"Attention statistics",
     "Entropy of each head's attention in nats: ln S (S = number of tokens) "
     "when a token spreads its attention evenly, 0 when it looks at one "
     "token only. Mean distance: the average |i \u2212 j| weighted by "
     "attention; uniform attention gives (S\u00b2 \u2212 1) / 3S. Self, "
     "previous, next and first: the share of attention on the token itself, "
     "its neighbours and the first token."},
};

std::string Badge(bool present, bool yes, std::string_view yes_text,
                  std::string_view no_text, double error,
                  std::string_view verdict) {
  if (!present) return "\u2014";
  return "<span class=\"badge " + std::string(yes ? "yes" : "no") +
         "\" title=\"" + EscapeHtml(verdict) + "\">" +
         EscapeHtml(yes ? yes_text : no_text) + "</span> <span class=\"num\">" +
         FormatNumber(error) + "</span>";
}

std::string Cell(const std::string& html, bool numeric = false) {
  return std::string(numeric ? "<td class=\"num\">" : "<td>") + html + "</td>";
}

std::string SummaryRow(const ModelDiagnosis& m, size_t index) {
  const encoder::v1::DiagnoseResponse& d = m.diagnosis;
  const encoder::v1::StructureProbe& st = d.structure();
  const std::string dash = "\u2014";
  std::string hooks;
  for (const std::string& hook : m.info.positional().hooks()) {
    hooks += (hooks.empty() ? "" : ", ") + EscapeHtml(hook);
  }
  std::string toeplitz = dash;
  std::string code_distance = dash;
  std::string residuals = dash;
  std::string symmetry = dash;
  std::string slopes = dash;
  if (st.kind() == "additive") {
    toeplitz = FormatNumber(st.toeplitz_deviation());
    code_distance = FormatNumber(st.min_code_distance());
    residuals.clear();
    for (int i = 0; i < st.shift_ks_size() && i < st.shift_residuals_size();
         ++i) {
      residuals += (residuals.empty() ? "" : "<br>") + std::string("k=") +
                   std::to_string(st.shift_ks(i)) + ": " +
                   FormatNumber(st.shift_residuals(i));
    }
    if (residuals.empty()) residuals = dash;
  } else if (st.kind() == "rotary") {
    toeplitz = FormatNumber(st.relativity_deviation()) +
               "<br>norm ratio: " + FormatNumber(st.norm_ratio_deviation());
  } else if (st.kind() == "bias") {
    toeplitz = FormatNumber(st.toeplitz_deviation());
    symmetry = std::string(st.symmetric() ? "symmetric" : "asymmetric") + " (" +
               FormatNumber(st.symmetry_deviation()) + ")";
    if (st.slopes_size() > 0) {
      slopes.clear();
      for (double s : st.slopes()) {
        slopes += (slopes.empty() ? "" : ", ") + FormatNumber(s);
      }
    }
  }
  double entropy = 0;
  double distance = 0;
  for (const auto& h : d.attention_stats()) {
    entropy += h.entropy() / d.attention_stats_size();
    distance += h.mean_distance() / d.attention_stats_size();
  }
  const bool stats = d.attention_stats_size() > 0;
  return "<tr><td><a href=\"#m" + std::to_string(index) + "\">" +
         EscapeHtml(d.model()) + "</a></td>" + Cell(EscapeHtml(d.scheme())) +
         Cell(hooks.empty() ? "none" : hooks) +
         Cell(Badge(d.has_permutation(), d.permutation().equivariant(),
                    "equivariant", "not equivariant",
                    d.permutation().max_token_error(),
                    d.permutation().verdict())) +
         Cell(Badge(d.has_shift(), d.shift().relative_only(), "invariant",
                    "not invariant", d.shift().max_token_error(),
                    d.shift().verdict())) +
         Cell(toeplitz, true) + Cell(code_distance, true) +
         Cell(residuals, true) + Cell(symmetry) + Cell(slopes) +
         Cell(stats ? FormatNumber(entropy) + " / " +
                          FormatNumber(d.uniform_entropy())
                    : dash,
              true) +
         Cell(stats ? FormatNumber(distance) : dash, true) + "</tr>";
}

std::string DescribeInput(const ReportOptions& options) {
  if (options.ids.has_value()) {
    std::string ids;
    for (int64_t id : *options.ids) {
      ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    }
    return "token ids " + ids;
  }
  return "the text \u201c" + options.text.value_or(kDefaultReportText) +
         "\u201d";
}

// Runs the extrapolation probe alone on `request`'s model and input.
int Extrapolate(encoder::v1::EncoderService::Stub& stub,
                const ConnectionOptions& connection,
                const ReportOptions& options,
                encoder::v1::DiagnoseRequest request, ModelDiagnosis* entry) {
  request.set_return_attention_maps(false);
  request.set_extrapolation(true);
  request.mutable_extrapolation_options()->set_max_multiple(
      options.max_multiple);
  encoder::v1::DiagnoseResponse response;
  grpc::ClientContext context;
  SetDeadline(connection.deadline_ms, &context);
  const grpc::Status status = stub.Diagnose(&context, request, &response);
  if (!status.ok()) {
    PrintRpcError(grpc::Status(status.error_code(),
                               "extrapolation on model \"" + request.model() +
                                   "\": " + status.error_message()));
    return kExitRpcError;
  }
  entry->extrapolation = response.extrapolation();
  return kExitOk;
}

}  // namespace

std::string RenderReport(const ReportData& data) {
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width\">"
      "<title>Positional encoding report</title><style>";
  html += kStyle;
  html +=
      "</style></head><body><main><header><h1>Positional encoding "
      "report</h1><p class=\"meta\">" +
      std::to_string(data.models.size()) + " models compared on " +
      EscapeHtml(data.input_description);
  if (!data.models.empty()) {
    html += " (" +
            std::to_string(data.models[0].diagnosis.token_labels_size()) +
            " tokens)";
  }
  html += " \u00b7 server " + EscapeHtml(data.target) + "</p><nav>";
  for (size_t i = 0; i < data.models.size(); ++i) {
    html += "<a href=\"#m" + std::to_string(i) + "\">" +
            EscapeHtml(data.models[i].diagnosis.model()) + "</a>";
  }
  html +=
      "</nav></header><section id=\"guide\"><h3>How to read this "
      "report</h3><div class=\"guide\">";
  for (const auto& entry : kGuide) {
    html += "<div><h4>" + EscapeHtml(entry[0]) + "</h4><p>" +
            EscapeHtml(entry[1]) + "</p></div>";
  }
  html +=
      "</div></section><section id=\"summary\"><h3>Summary</h3>"
      "<table class=\"summary\"><thead><tr><th>Model</th><th>Scheme</th>"
      "<th>Position enters at</th><th>Permutation (max token error)</th>"
      "<th>Shift (max token error)</th><th>Toeplitz deviation</th>"
      "<th>Min code distance</th><th>Shift residuals</th>"
      "<th>Symmetry</th><th>Slopes</th><th>Mean entropy / ln S</th>"
      "<th>Mean attention distance</th></tr></thead><tbody>";
  for (size_t i = 0; i < data.models.size(); ++i) {
    html += SummaryRow(data.models[i], i);
  }
  html +=
      "</tbody></table><p class=\"note\">\u2014: does not apply to this "
      "scheme. Hover over a verdict for the server's full wording. For "
      "RoPE the Toeplitz column holds the relativity table's "
      "deviation.</p></section>";
  html += ExtrapolationSectionHtml(data.models);
  if (data.side_by_side) html += "<div class=\"side\">";
  for (size_t i = 0; i < data.models.size(); ++i) {
    html +=
        ModelSectionHtml(data.models[i], i, data.max_layers, data.max_heads);
  }
  if (data.side_by_side) html += "</div>";
  return html + "</main></body></html>\n";
}

int RunReport(const ConnectionOptions& connection,
              const ReportOptions& options) {
  auto stub = encoder::v1::EncoderService::NewStub(CreateChannel(connection));
  encoder::v1::ListModelsResponse listing;
  {
    grpc::ClientContext context;
    SetDeadline(connection.deadline_ms, &context);
    const grpc::Status status =
        stub->ListModels(&context, encoder::v1::ListModelsRequest(), &listing);
    if (!status.ok()) {
      PrintRpcError(status);
      return kExitRpcError;
    }
  }
  ReportData data;
  data.input_description = DescribeInput(options);
  data.target = connection.target;
  data.max_layers = options.max_layers;
  data.max_heads = options.max_heads;
  data.side_by_side = options.side_by_side;
  std::vector<std::string> names = options.models;
  if (names.empty()) {
    for (const auto& model : listing.models()) names.push_back(model.name());
  }
  for (const std::string& name : names) {
    const auto found =
        std::find_if(listing.models().begin(), listing.models().end(),
                     [&](const auto& model) { return model.name() == name; });
    if (found == listing.models().end()) {
      std::string served;
      for (const auto& model : listing.models()) {
        served += (served.empty() ? "" : ", ") + model.name();
      }
      PrintError("--models: the server has no model \"" + name +
                 "\" (it has: " + served + ")");
      return kExitUsage;
    }
    encoder::v1::DiagnoseRequest request;
    request.set_model(name);
    if (options.ids.has_value()) {
      for (int64_t id : *options.ids) request.mutable_token_ids()->add_ids(id);
    } else {
      request.set_text(options.text.value_or(kDefaultReportText));
    }
    request.set_structure_positions(options.structure_positions);
    request.set_return_attention_maps(true);
    ModelDiagnosis& entry = data.models.emplace_back();
    entry.info = *found;
    grpc::ClientContext context;
    SetDeadline(connection.deadline_ms, &context);
    const grpc::Status status =
        stub->Diagnose(&context, request, &entry.diagnosis);
    if (!status.ok()) {
      PrintRpcError(grpc::Status(
          status.error_code(),
          "Diagnose on model \"" + name + "\": " + status.error_message()));
      return kExitRpcError;
    }
    if (options.extrapolation) {
      if (int rc = Extrapolate(*stub, connection, options, request, &entry);
          rc != kExitOk) {
        return rc;
      }
    }
  }
  const std::string html = RenderReport(data);
  std::ofstream file(options.out, std::ios::binary | std::ios::trunc);
  file << html;
  file.close();
  if (!file) {
    PrintError("cannot write " + options.out);
    return kExitUsage;
  }
  std::cout << "wrote " << options.out << ": " << data.models.size()
            << " models, " << html.size() << " bytes" << std::endl;
  return kExitOk;
}

}  // namespace encoder_client

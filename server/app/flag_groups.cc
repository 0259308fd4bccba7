#include "server/app/flag_groups.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace encoder {

namespace {

constexpr char kAdvanced[] = "Advanced";

// Each group's options by their first long name, the groups in the order
// docs/configuration.md lists them. A flag missing here makes
// --help-markdown fail (the configuration_doc test): adding one means
// choosing where --help shows it.
using GroupList = std::vector<std::pair<std::string, std::vector<std::string>>>;
const GroupList& Groups() {
  static const auto* groups = new GroupList{
      {"Models",
       {"model-id", "revision", "huggingface-hub-cache", "hf-token-file",
        "hub-offline", "model-dir", "models", "builtin-models",
        "served-model-name", "model-alias", "strict-model-names",
        "model-dir-pooling", "rope-scaling", "rerank-template", "strip-text",
        "long-input", "long-input-drift", "device"}},
      {"gRPC",
       {"listen", "health-listen", "reflection", "max-receive-message-bytes",
        "max-send-message-bytes"}},
      {"HTTP",
       {"http-listen", "http-address", "http-max-body-bytes",
        "http-max-connections", "http-request-timeout", "http-keep-alive",
        "http-docs"}},
      {"Batching and limits",
       {"max-batch-tokens", "max-batch-sequences", "max-queue-delay",
        "max-queued-sequences", "max-inputs-per-request",
        "memory-limit-bytes"}},
      {"Precision and threads",
       {"dtype", "quantize", "pack-weights", "intra-op-threads",
        "executions-per-model"}},
      {"Security",
       {"tls-cert", "tls-key", "tls-client-ca", "tls-client-auth", "api-key",
        "auth-token-file", "auth-health", "http-tls-cert", "http-tls-key",
        "metrics-basic-auth-file"}},
      {"Observability",
       {"log-level", "log-format", "log-rate-limit", "ready-file"}},
      {"Tracing (OpenTelemetry)",
       {"otlp-endpoint", "otlp-protocol", "otlp-service-name",
        "otlp-resource-attributes", "otlp-sampler", "otlp-sampler-arg",
        "otlp-max-queue-spans", "otlp-max-export-batch-spans",
        "otlp-schedule-delay", "otlp-export-timeout"}},
      {"text-embeddings-inference",
       {"port", "hf-token", "json-output", "auto-truncate", "pooling",
        "default-prompt-name", "default-prompt"}},
      {kAdvanced,
       {// text-embeddings-inference's flags of no effect, or refused
        "tokenization-workers", "uds-path", "disable-spans", "prometheus-port",
        "cors-allow-origin", "dense-path",
        // threads and memory
        "share-intra-op-threads", "one-thread-below-mflop", "blas-threads",
        "cpu-buffer-cache-bytes", "malloc-trim-idle",
        "batch-memory-budget-bytes", "grpc-memory-quota-bytes",
        "max-unread-response-bytes", "max-unread-response-bytes-per-connection",
        // batching
        "max-batch-time", "fair-share", "skip-padding-min-share",
        "batch-profile-time", "max-chunks-per-input",
        "max-tokenize-texts-per-request",
        // kernels
        "fused-attention", "cudnn-attention", "int8-float-channels",
        "int8-row-outliers", "int8-attention", "bf16-attention",
        "packed-max-rows", "packed-min-elements", "force-dtype",
        // Diagnose
        "max-diagnose-tokens", "max-structure-positions",
        "max-pending-diagnose", "max-extrapolation-tokens",
        // start, drain, connections
        "warm-up", "drain-grace", "drain-unready", "max-concurrent-streams",
        "max-health-watchers", "tls-reload-interval", "http-max-header-bytes",
        "http-max-pipelined-requests", "http-threads", "log-rate-limit-keys",
        "max-request-id-bytes"}},
  };
  return *groups;
}

// --help without the Advanced group's options unless `show_advanced`.
class AdvancedHiddenFormatter : public CLI::Formatter {
 public:
  explicit AdvancedHiddenFormatter(bool show_advanced)
      : show_advanced_(show_advanced) {}
  std::string make_group(std::string group, bool is_positional,
                         std::vector<const CLI::Option*> opts) const override {
    if (group == kAdvanced && !show_advanced_) return "";
    return CLI::Formatter::make_group(std::move(group), is_positional,
                                      std::move(opts));
  }

 private:
  bool show_advanced_;
};

std::string Cell(const std::string& text) {
  return absl::StrReplaceAll(text, {{"|", "\\|"}, {"\n", " "}});
}

}  // namespace

std::string FlagGroup(const std::string& name) {
  for (const auto& [group, names] : Groups()) {
    for (const std::string& n : names) {
      if (n == name) return group;
    }
  }
  return "";
}

std::vector<std::string> GroupFlags(CLI::App& app, bool show_advanced) {
  std::vector<std::string> missing;
  for (CLI::Option* option : app.get_options()) {
    const std::string name = option->get_single_name();
    if (name == "help" || name == "help-all" || name == "version" ||
        name == "config") {
      continue;
    }
    std::string group = FlagGroup(name);
    if (group.empty()) {
      missing.push_back(name);
      group = kAdvanced;
    }
    option->group(group);
  }
  // Not CLI11's empty group, which would hide them: its errors would then
  // not name the flag.
  app.formatter(std::make_shared<AdvancedHiddenFormatter>(show_advanced));
  return missing;
}

std::string FlagsMarkdown(CLI::App& app) {
  std::map<std::string, std::vector<CLI::Option*>> by_group;
  for (CLI::Option* option : app.get_options()) {
    const std::string name = option->get_single_name();
    const std::string group = FlagGroup(name);
    if (!group.empty()) by_group[group].push_back(option);
  }
  std::string out;
  for (const auto& entry : Groups()) {
    const std::string& group = entry.first;
    auto it = by_group.find(group);
    if (it == by_group.end()) continue;
    absl::StrAppend(&out, "## ", group, "\n\n",
                    "| flag | environment | type | default | what it sets |\n",
                    "|---|---|---|---|---|\n");
    for (CLI::Option* option : it->second) {
      std::string names;
      for (const std::string& l : option->get_lnames()) {
        absl::StrAppend(&names, names.empty() ? "" : ", ", "`--", l, "`");
      }
      for (const std::string& s : option->get_snames()) {
        absl::StrAppend(&names, ", `-", s, "`");
      }
      std::string type = option->get_type_name();
      if (type.empty()) type = "flag";
      if (type.front() == ':') type = "TEXT" + type;  // a checked flag
      const std::string& env = option->get_envname();
      absl::StrAppend(&out, "| ", names, " | ",
                      env.empty() ? "" : absl::StrCat("`", env, "`"), " | ",
                      Cell(type), " | ",
                      option->get_default_str().empty()
                          ? ""
                          : absl::StrCat("`", option->get_default_str(), "`"),
                      " | ", Cell(option->get_description()), " |\n");
    }
    out += "\n";
  }
  return out;
}

}  // namespace encoder

#include "server/app/tei_flags.h"

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace encoder {

void DefineTeiFlags(CLI::App& app, ServeFlags& f) {
  app.add_option("--port,-p", f.tei.port,
                 "text-embeddings-inference's HTTP port: --http-listen=:PORT "
                 "(on --http-address / --hostname)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--hf-token,--hf-api-token", f.tei.hf_token,
                 "the Hub token for gated or private models (prefer HF_TOKEN "
                 "or --hf-token-file: a flag's value shows in the process "
                 "list)");
  app.add_flag("--json-output", f.tei.json_output,
               "text-embeddings-inference's JSON logs: --log-format=json");
  app.add_flag("--auto-truncate{true}", f.tei.auto_truncate,
               "text-embeddings-inference's switch, as --long-input: true "
               "(the default) truncates inputs past the model's length when "
               "a request names no policy, false refuses them");
  app.add_option("--pooling", f.tei_pooling,
                 "text-embeddings-inference's pooling override for the "
                 "listed models: cls, mean, last-token (as "
                 "--model-dir-pooling first, mean, last_token); splade is "
                 "refused (SPLADE models are served as such)")
      ->check(CLI::IsMember({"cls", "mean", "last-token", "splade"}));
  app.add_option("--default-prompt-name", f.tei.default_prompt_name,
                 "text-embeddings-inference's default prompt by name: one of "
                 "the prompts of each model served from a checkpoint "
                 "(config_sentence_transformers.json), prepended to every "
                 "text input whose request names no prompt");
  app.add_option("--default-prompt", f.tei.default_prompt,
                 "text-embeddings-inference's default prompt text, prepended "
                 "to every text input of each model served from a checkpoint "
                 "whose request names no prompt (listed among the model's "
                 "prompts as \"default-prompt\")");
  struct Ignored {
    const char* flag;
    const char* why;
  };
  static constexpr Ignored kNoEffect[] = {
      {"--tokenization-workers",
       "tokenizing runs on the threads that take each request"},
      {"--uds-path", "there is no Python backend to talk to"},
      {"--disable-spans", "log lines carry no span context"},
      {"--prometheus-port",
       "metrics are served at /metrics on the HTTP port (as in "
       "text-embeddings-inference's HTTP builds)"},
  };
  for (const Ignored& ignored : kNoEffect) {
    app.add_option_function<std::string>(
           ignored.flag,
           [&f, ignored](const std::string& value) {
             f.tei.no_effect.push_back(absl::StrCat(
                 ignored.flag, " ", value, " has no effect: ", ignored.why));
           },
           absl::StrCat("accepted for text-embeddings-inference's command "
                        "line; no effect: ",
                        ignored.why))
        ->expected(0, 1);
  }
  static constexpr Ignored kRefused[] = {
      {"--cors-allow-origin", "the HTTP port sends no CORS headers"},
      {"--dense-path",
       "Dense modules are those modules.json lists; serve another as its "
       "own directory"},
  };
  for (const Ignored& refused : kRefused) {
    app.add_option_function<std::string>(
           refused.flag,
           [&f, refused](const std::string&) {
             f.tei.refused.push_back(
                 absl::StrCat(refused.flag, " (", refused.why, ")"));
           },
           absl::StrCat("text-embeddings-inference's flag, refused here: ",
                        refused.why))
        ->expected(0, 1);
  }
}

absl::Status FinishTeiFlags(ServeFlags& f, std::vector<std::string>* notes) {
  if (!f.tei.refused.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not served here: ", absl::StrJoin(f.tei.refused, "; "),
                     " (docs/migrating-from-tei.md)"));
  }
  for (const std::string& note : f.tei.no_effect) notes->push_back(note);
  if (f.tei.port >= 0) {
    if (f.http_listen != "auto") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--port ", f.tei.port, " and --http-listen=", f.http_listen,
          " both set the HTTP port; give one"));
    }
    f.http_listen = absl::StrCat(":", f.tei.port);
  }
  if (f.tei.json_output) f.log_format = "json";
  if (!f.tei.auto_truncate.empty()) {
    const std::string v = absl::AsciiStrToLower(f.tei.auto_truncate);
    if (v != "true" && v != "false") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auto-truncate=", f.tei.auto_truncate, ": true or false"));
    }
    // TEI's switch is the server's default for inputs past the length.
    f.limits.long_input =
        v == "true" ? LongInputPolicy::kTruncate : LongInputPolicy::kRefuse;
  }
  if (f.tei.default_prompt_name.has_value() &&
      f.tei.default_prompt.has_value()) {
    return absl::InvalidArgumentError(
        "--default-prompt-name and --default-prompt: give one");
  }
  if (!f.tei_pooling.empty()) {
    if (!f.model_dir_pooling.empty()) {
      return absl::InvalidArgumentError(
          "--pooling and --model-dir-pooling: give one");
    }
    if (f.tei_pooling == "splade") {
      return absl::InvalidArgumentError(
          "--pooling splade: a SPLADE model is served from its "
          "sentence-transformers SpladePooling module or as a *ForMaskedLM "
          "(EmbedSparse, /embed_sparse), not by a pooling override");
    }
    f.model_dir_pooling = f.tei_pooling == "cls"          ? "first"
                          : f.tei_pooling == "last-token" ? "last_token"
                                                          : f.tei_pooling;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ApplyTeiEnvironment(CLI::App& app) {
  // TEI's variable for each of its flags (clap's `env`), by our option.
  static constexpr std::pair<const char*, const char*> kTeiVariables[] = {
      {"PORT", "--port"},
      {"MAX_BATCH_TOKENS", "--max-batch-tokens"},
      {"MAX_BATCH_REQUESTS", "--max-batch-requests"},
      {"MAX_CLIENT_BATCH_SIZE", "--max-client-batch-size"},
      {"MAX_CONCURRENT_REQUESTS", "--max-concurrent-requests"},
      {"AUTO_TRUNCATE", "--auto-truncate"},
      {"POOLING", "--pooling"},
      {"DTYPE", "--dtype"},
      {"REVISION", "--revision"},
      {"SERVED_MODEL_NAME", "--served-model-name"},
      {"PAYLOAD_LIMIT", "--payload-limit"},
      {"API_KEY", "--api-key"},
      {"JSON_OUTPUT", "--json-output"},
      {"DEFAULT_PROMPT_NAME", "--default-prompt-name"},
      {"DEFAULT_PROMPT", "--default-prompt"},
      {"HF_API_TOKEN", "--hf-api-token"},
      {"TOKENIZATION_WORKERS", "--tokenization-workers"},
      {"UDS_PATH", "--uds-path"},
      {"DISABLE_SPANS", "--disable-spans"},
      {"PROMETHEUS_PORT", "--prometheus-port"},
      {"OTLP_ENDPOINT", "--otlp-endpoint"},
      {"OTLP_SERVICE_NAME", "--otlp-service-name"},
      {"CORS_ALLOW_ORIGIN", "--cors-allow-origin"},
      {"DENSE_PATH", "--dense-path"},
  };
  // Whether the command line or the option's ENCODER_ variable set it.
  auto set_here = [&app](const char* name) {
    CLI::Option* o = app.get_option_no_throw(name);
    if (o == nullptr) return false;
    const std::string& own = o->get_envname();
    return o->count() > 0 ||
           (!own.empty() && std::getenv(own.c_str()) != nullptr);
  };
  std::vector<std::string> notes;
  for (const auto& [variable, flag] : kTeiVariables) {
    const char* value = std::getenv(variable);
    if (value == nullptr || *value == '\0') continue;
    CLI::Option* option = app.get_option_no_throw(flag);
    if (option == nullptr || set_here(flag)) continue;
    // PORT (set by the images, as TEI's are) yields to an HTTP address
    // given in full, which names the port itself.
    if (std::string_view(variable) == "PORT" && set_here("--http-listen")) {
      continue;
    }
    try {
      option->add_result(std::string(value));
      option->run_callback();
    } catch (const CLI::Error& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(variable, "=", value, " (text-embeddings-inference's ",
                       flag, "): ", e.what()));
    }
    const bool secret = std::string_view(variable) == "API_KEY" ||
                        std::string_view(variable) == "HF_API_TOKEN";
    notes.push_back(absl::StrCat(variable, "=", secret ? "(set)" : value,
                                 " read as ", flag,
                                 " (text-embeddings-inference's variable)"));
  }
  return notes;
}

}  // namespace encoder

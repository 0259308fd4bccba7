// encoder-server's command line. Each flag is bound to the field of the
// option struct it sets (core::ServiceLimits, core::DiagnoseLimits,
// service::ServerOptions, runner::HostOptions, runner::IdleTrimOptions,
// logging::LogOptions), so a flag's default is
// the struct's and lives in one place; the flags with no struct of their
// own (start-up choices, derived limits, the drain) are fields here.
// Every flag can also be set from the environment (AddEnvironmentNames).
#ifndef ENCODER_SERVER_APP_SERVE_FLAGS_H_
#define ENCODER_SERVER_APP_SERVE_FLAGS_H_

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/inference.h"
#include "server/logging/access_log.h"
#include "server/logging/log.h"
#include "server/model/weights/model_repository.h"
#include "server/runner/cpu_buffer_cache.h"
#include "server/runner/idle_trim.h"
#include "server/runner/model_host.h"
#include "server/runner/thread_policy.h"
#include "server/service/server.h"

namespace encoder {

struct ServeFlags {
  core::ServiceLimits limits;     // every front's
  core::DiagnoseLimits diagnose;  // every front's
  service::ServerOptions server;  // the gRPC front's transport
  runner::HostOptions host;
  runner::IdleTrimOptions trim;
  logging::LogOptions log;  // rate_limit_per_second (level, format: below)

  // HOST:PORT, ":PORT" (on --http-address), "auto" or "off"
  // (ResolveHttpListen).
  std::string http_listen = "auto";
  std::string models;  // repository JSON
  std::vector<std::string> model_dirs;
  // --model-id values ([NAME=]ORG/ID[@REV] or a directory; model_ids.h),
  // resolved into model_dirs before BuildRepository; MODEL_ID when none.
  std::vector<std::string> model_ids;
  std::string revision;       // for --model-id values without @REV
  std::string hub_cache;      // empty: HF_HUB_CACHE, HF_HOME/hub, ...
  std::string hf_token_file;  // empty: HF_TOKEN, then HF_HOME/token
  bool hub_offline = false;   // also HF_HUB_OFFLINE=1
  std::string model_dir_pooling;
  // NAME=JSON: the rotary scaling NAME's checkpoint is served with
  // (ModelSpec.rope_scaling).
  std::vector<std::string> rope_scalings;
  std::vector<std::string> rerank_templates;  // NAME=TEMPLATE
  bool strip_text = false;  // ModelSpec.strip_text for models that omit it
  // The built-in models beside the listed ones (alone when none is listed).
  bool builtin_models = false;
  // The first listed model's served name (its own stays an alias).
  std::string served_model_name;
  std::vector<std::string> model_aliases;  // ALIAS=NAME
  bool strict_model_names = false;         // Repository.strict_names

  // text-embeddings-inference's own flag names (DefineTeiFlags), resolved
  // by FinishServeFlags.
  struct Tei {
    int port = -1;              // --port / -p: the HTTP port
    std::string hf_token;       // --hf-token, --hf-api-token
    bool json_output = false;   // --json-output: --log-format=json
    std::string auto_truncate;  // --auto-truncate[=BOOL]
    // --default-prompt-name NAME (one of the checkpoint's prompts) and
    // --default-prompt TEXT: the prompt every text input of the models
    // served from a checkpoint gets when a request names none
    // (BuildRepository; model::ModelSpec::forced_default_prompt*).
    std::optional<std::string> default_prompt_name;
    std::optional<std::string> default_prompt;
    // Accepted, of no effect here (FinishServeFlags notes which).
    std::vector<std::string> no_effect;
    // Given, but not served: refused by name.
    std::vector<std::string> refused;
  } tei;
  std::string tei_pooling;  // --pooling (TEI's names): model_dir_pooling
  std::string device = "auto";
  int intra_op_threads = 0;  // 0: runner::DefaultIntraOpThreads
  // runner::EnableIntraOpShare: auto | true | false (auto:
  // ShareIntraOpByDefault).
  std::string share_intra_op = "auto";
  int blas_threads = 0;  // 0: every usable core (thread_policy.h)
  // runner::SetOneThreadBelowFlops, in millions; 0: off.
  double one_thread_below_mflop = runner::kDefaultOneThreadBelowMflop;
  // 0: runner::DefaultExecutionsPerModel.
  int executions_per_model = 0;
  int64_t cpu_buffer_cache_bytes = runner::kDefaultCpuBufferCacheBytes;
  // 0: derived from the memory limit at start.
  int64_t grpc_memory_quota_bytes = 0;
  int64_t max_unread_response_bytes = 0;
  double drain_grace_seconds = 20;
  double drain_unready_seconds = 1;
  std::string ready_file;
  std::string log_level = "info";
  std::string log_format = "text";
  int64_t max_request_id_bytes = logging::kDefaultMaxRequestIdBytes;
  // The old spellings met while parsing (flag_units.h: a duration without
  // a unit, an old variable name; on/off for true/false): warnings that
  // FinishServeFlags adds to its notes.
  std::vector<std::string> spelling_notes;
};

// Registers every flag on `app`, bound to `flags`.
void DefineServeFlags(CLI::App& app, ServeFlags& flags);

// --config FILE: a TOML file setting options by their long names
// (max-batch-tokens = 8192); an unknown key is an error. The command line
// wins over it, and it over the environment (CLI11 reads the file first).
void AddConfigFile(CLI::App& app);

// Lets every option of `app` come from ENCODER_<NAME>, the long name
// upper-cased with '-' as '_'; the command line and --config win.
void AddEnvironmentNames(CLI::App& app);

// The HTTP port's address from --http-listen: "" (no HTTP port) for "off"
// or an empty value; for "auto", port 8080 on --http-address, or port 0 (a
// free port, reported in --ready-file) when --listen asks for port 0, so
// that servers started on free gRPC ports never contend for 8080; anything
// else as given.
std::string ResolveHttpListen(const std::string& http_listen,
                              const std::string& grpc_listen);

// Settles what the command line leaves to after parsing: TEI's flags
// (FinishTeiFlags, server/app/tei_flags.h; `notes` gets a line per TEI flag
// accepted without effect, and the spelling notes), then the listen
// addresses: --listen=off becomes an empty server.listen (no gRPC front),
// --http-listen goes through ResolveHttpListen, and both off is refused.
absl::Status FinishServeFlags(ServeFlags& flags,
                              std::vector<std::string>* notes);

// The models to serve: the repository file's and the --model-dir ones, or
// the built-in set when neither is given.
absl::StatusOr<model::Repository> BuildRepository(const ServeFlags& flags);

}  // namespace encoder

#endif  // ENCODER_SERVER_APP_SERVE_FLAGS_H_

#include "server/app/app.h"

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "server/app/build_info.h"
#include "server/app/drain.h"
#include "server/app/flag_groups.h"
#include "server/app/flag_units.h"
#include "server/app/process.h"
#include "server/app/tei_flags.h"
#include "server/logging/log.h"

namespace encoder::app {
namespace {

// Logs why start-up failed; the exit code for it.
int Fail(const absl::Status& status) {
  spdlog::error("{}", status.ToString());
  return 1;
}

// Whether `flag` is among the arguments, as given.
bool HasArgument(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], flag) == 0) return true;
  }
  return false;
}

// Defines and parses the command line; an exit code when the process ends
// here (--help, --help-all, --help-markdown, --version, a bad flag).
std::optional<int> ParseFlags(int argc, char** argv, Process& p) {
  CLI::App app(
      "Serves Transformer encoders with selectable positional schemes over "
      "gRPC (encoder.v1.EncoderService), with health, reflection and "
      "Prometheus metrics.",
      "encoder-server");
  encoder::DefineServeFlags(app, p.flags);
  encoder::DefineSecurityFlags(app, p.security);
  encoder::DefinePrecisionFlags(app, p.precision);
  encoder::DefineTracingFlags(app, p.tracing);
  app.set_version_flag("--version", encoder::VersionText(),
                       "print the version, git commit, build type, compiler "
                       "and LibTorch version, and exit");
  encoder::AddConfigFile(app);
  encoder::AddEnvironmentNames(app);
  encoder::AddValueSyntax(app, &p.flags.spelling_notes);
  app.set_help_all_flag("--help-all", "every flag, the advanced ones too");
  // The advanced flags are listed by --help-all only; they parse always.
  const bool markdown = HasArgument(argc, argv, "--help-markdown");
  const std::vector<std::string> ungrouped = encoder::GroupFlags(
      app, markdown || HasArgument(argc, argv, "--help-all"));
  if (markdown) {  // docs/configuration.md's tables
    if (!ungrouped.empty()) {
      std::fprintf(stderr,
                   "flags in no group (server/app/flag_groups.cc): %s\n",
                   absl::StrJoin(ungrouped, ", ").c_str());
      return 1;
    }
    std::fputs(encoder::FlagsMarkdown(app).c_str(), stdout);
    return 0;
  }
  app.footer(
      "Every option can also be set from the environment as ENCODER_<NAME>, "
      "the long name upper-cased with '-' as '_' (e.g. "
      "ENCODER_MAX_BATCH_TOKENS=8192 for --max-batch-tokens); the command "
      "line and --config win. --help-all lists the advanced flags too.");
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<std::vector<std::string>> tei_env =
      encoder::ApplyTeiEnvironment(app);
  if (!tei_env.ok()) {
    std::fprintf(stderr, "%s\n",
                 std::string(tei_env.status().message()).c_str());
    return 2;
  }
  p.flag_notes = *std::move(tei_env);
  absl::StatusOr<std::vector<std::string>> otel_env =
      encoder::ApplyOtelEnvironment(app);
  if (!otel_env.ok()) {
    std::fprintf(stderr, "%s\n",
                 std::string(otel_env.status().message()).c_str());
    return 2;
  }
  p.flag_notes.insert(p.flag_notes.end(), otel_env->begin(), otel_env->end());
  if (absl::Status s = encoder::FinishServeFlags(p.flags, &p.flag_notes);
      !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  return std::nullopt;
}

// Blocks SIGINT, SIGTERM and SIGHUP for WaitForSignal's sigwait; called
// before any thread starts (the logger's flusher included) so that every
// thread inherits the mask.
void BlockSignals(Process& p) {
  sigemptyset(&p.signals);
  sigaddset(&p.signals, SIGINT);
  sigaddset(&p.signals, SIGTERM);
  sigaddset(&p.signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &p.signals, nullptr);
}

// Sets up the logger from the --log-* flags and logs the build.
void ConfigureLogging(const encoder::ServeFlags& flags) {
  encoder::logging::LogOptions log_options = flags.log;
  log_options.format = flags.log_format == "json"
                           ? encoder::logging::LogFormat::kJson
                           : encoder::logging::LogFormat::kText;
  log_options.level = spdlog::level::from_str(flags.log_level);
  encoder::logging::SetupLogging(log_options);
  encoder::logging::SetMaxRequestIdBytes(
      static_cast<size_t>(flags.max_request_id_bytes));
  const encoder::BuildInfo& build = encoder::GetBuildInfo();
  spdlog::info("encoder-server {} (commit {}, {}, {}, LibTorch {})",
               build.version, build.commit, build.build_type, build.compiler,
               build.libtorch);
}

// Waits for SIGINT or SIGTERM and returns it; each SIGHUP meanwhile reloads
// the bearer tokens.
int WaitForSignal(Process& p) {
  int signal_number = 0;
  while (sigwait(&p.signals, &signal_number) == 0 && signal_number == SIGHUP) {
    if (!p.tokens) continue;
    const absl::Status reloaded = p.tokens->Reload();
    if (reloaded.ok()) {
      spdlog::info("SIGHUP: {} bearer tokens in force",
                   p.tokens->token_count());
    } else {
      spdlog::error("SIGHUP: {}; the previous tokens stay in force",
                    reloaded.ToString());
    }
  }
  return signal_number;
}

// Drains every front (bounded by --drain-grace; drain.h), then stops the
// listener watch, the HTTP front, the gRPC front and the models, in that
// order.
void Drain(Process& p, int signal_number) {
  spdlog::info("signal {}: draining (grace {} s)", signal_number,
               p.flags.drain_grace_seconds);
  const bool drained = app::Drain({p.core.get(), p.host.get(), p.server.get()},
                                  absl::Seconds(p.flags.drain_grace_seconds),
                                  absl::Seconds(p.flags.drain_unready_seconds));
  spdlog::info(drained ? "drained; exiting"
                       : "grace period over with work left; exiting");
  if (p.prometheus) p.prometheus->SetConnectionReader(nullptr);
  p.watch.reset();
  p.http.reset();
  p.server.reset();
  p.host.reset();
  // What the fronts and batches traced is exported (bounded by
  // --otlp-export-timeout) before the process exits.
  encoder::tracing::Install(nullptr);
  p.tracer.reset();
}

}  // namespace

int Main(int argc, char** argv) {
  Process p;
  if (std::optional<int> exit_code = ParseFlags(argc, argv, p)) {
    return *exit_code;
  }
  BlockSignals(p);
  ConfigureLogging(p.flags);
  for (const std::string& note : p.flag_notes) spdlog::warn("{}", note);
  RaiseDescriptorLimits();
  if (absl::Status s = ConfigureCompute(p); !s.ok()) return Fail(s);
  CreateMetrics(p);
  if (absl::Status s = StartTracing(p); !s.ok()) return Fail(s);
  if (absl::Status s = ConfigureServer(p); !s.ok()) return Fail(s);
  BuildCore(p);
  if (absl::Status s = StartGrpc(p); !s.ok()) return Fail(s);
  if (absl::Status s = StartHttp(p); !s.ok()) return Fail(s);
  if (absl::Status s = FetchModels(p); !s.ok()) return Fail(s);
  if (absl::Status s = ReadRepository(p); !s.ok()) return Fail(s);
  ConfigureModelHost(p);
  AddResourceReaders(p);
  if (absl::Status s = LoadModels(p); !s.ok()) return Fail(s);
  WatchListeners(p);
  if (absl::Status s = AnnounceReady(p); !s.ok()) return Fail(s);
  Drain(p, WaitForSignal(p));
  return 0;
}

}  // namespace encoder::app

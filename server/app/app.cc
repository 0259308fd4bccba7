#include "server/app/app.h"

#include <ATen/Parallel.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <sys/resource.h>

#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/stubs/common.h"
#include "server/app/accept_reserve.h"
#include "server/app/build_info.h"
#include "server/app/drain.h"
#include "server/app/flag_groups.h"
#include "server/app/flag_units.h"
#include "server/app/listener_watch.h"
#include "server/app/model_ids.h"
#include "server/app/precision_flags.h"
#include "server/app/security_flags.h"
#include "server/app/serve_flags.h"
#include "server/app/tei_flags.h"
#include "server/common/status_macros.h"
#include "server/http/http_front.h"
#include "server/logging/log.h"
#include "server/metrics/prometheus_metrics.h"
#include "server/model/dtype.h"
#include "server/model/weights/model_repository.h"
#include "server/runner/cpu_buffer_cache.h"
#include "server/runner/device_memory.h"
#include "server/runner/idle_trim.h"
#include "server/runner/model_host.h"
#include "server/runner/thread_policy.h"
#include "server/service/server.h"

namespace encoder::app {
namespace {

using runner::HostOptions;

// Every connection holds a descriptor: start with the soft limit at the
// hard limit, so the kernel's limit is the only one (accept_reserve.h keeps
// the listeners alive at that limit).
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t before = limit.rlim_cur;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) limit.rlim_cur = before;
  }
  spdlog::info("open file limit {} (was {}, hard limit {})",
               static_cast<uint64_t>(limit.rlim_cur),
               static_cast<uint64_t>(before),
               static_cast<uint64_t>(limit.rlim_max));
}

absl::StatusOr<at::Device> ParseDevice(const std::string& name) {
  if (name == "auto") {
    return at::hasCUDA() ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  }
  if (name == "cpu") return at::Device(at::kCPU);
  if (name == "cuda" || absl::StartsWith(name, "cuda:")) {
    if (!at::hasCUDA()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--device=", name, " but this build or machine has ",
                       "no CUDA; use --device=cpu"));
    }
    try {
      return at::Device(name);
    } catch (const c10::Error&) {
      return absl::InvalidArgumentError(absl::StrCat("bad --device ", name));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--device must be auto, cpu, cuda or cuda:N, got ", name));
}

bool WriteReadyFile(const std::string& path, int grpc_port, int http_port,
                    int health_port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "{\"grpc_port\": " << grpc_port << ", \"http_port\": " << http_port
        << ", \"metrics_port\": " << http_port
        << ", \"health_port\": " << health_port << "}\n";
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

int Fail(const absl::Status& status) {
  spdlog::error("{}", status.ToString());
  return 1;
}

// Watches the listening ports (listener_watch.h): one that stops accepting
// marks the process unhealthy on every front. Also gives /metrics the
// transport's counts.
std::shared_ptr<encoder::ListenerWatch> WatchTransports(
    core::Inference* core, service::EncoderServer* grpc,
    encoder::http::HttpFront* http,
    encoder::metrics::PrometheusMetrics* prometheus) {
  std::vector<encoder::ListenerWatch::Listener> listeners;
  if (grpc != nullptr) {
    listeners.push_back({"grpc", grpc->port()});
    listeners.push_back({"health", grpc->health_port()});
  }
  if (http != nullptr) listeners.push_back({"http", http->port()});
  auto watch = std::make_shared<encoder::ListenerWatch>(
      listeners, encoder::ListenerWatchOptions{},
      [core, grpc](const std::string& name) {
        core->MarkUnhealthy(absl::StrCat(
            "the ", name, " port stopped accepting connections; restart"));
        if (grpc != nullptr) grpc->MarkUnhealthy();
      });
  if (prometheus != nullptr) {
    // The reader holds the watch: a scrape may still run it after main
    // lets go of its own reference.
    prometheus->SetConnectionReader([http, w = watch] {
      encoder::metrics::ConnectionSample c;
      if (http != nullptr) {
        const encoder::http::ServerStats s = http->stats();
        c.http = true;
        c.http_open = s.open_connections;
        c.http_accepted = s.accepted_connections;
        c.http_client_closed = s.client_closed;
        c.http_timed_out = s.timed_out;
        c.http_rejected = s.rejected_framing;
      }
      c.shed_for_descriptors = encoder::ConnectionsShedForDescriptors();
      c.accept_exhausted = encoder::AcceptExhaustionEvents();
      for (const auto& l : w->states()) c.listeners.push_back({l.name, l.up});
      return c;
    });
  }
  return watch;
}

// What start-up builds, shared by the steps below. Members are declared in
// start-up order, so they are destroyed in the reverse order.
struct Process {
  encoder::ServeFlags flags;
  // Lines about the command line to log once logging is set up.
  std::vector<std::string> flag_notes;
  encoder::SecurityFlags security;
  encoder::PrecisionFlags precision;
  sigset_t signals{};
  at::Device device = at::kCPU;
  std::unique_ptr<encoder::runner::IdleMallocTrimmer> trimmer;
  const encoder::model::CpuFeatures* cpu = nullptr;
  HostOptions host_options;
  encoder::metrics::NoopMetrics noop;
  std::unique_ptr<encoder::metrics::PrometheusMetrics> prometheus;
  encoder::metrics::Metrics* metrics = &noop;  // prometheus when it exists
  encoder::service::ServerOptions server_options;
  int64_t memory_limit = 0;
  int64_t grpc_quota = 0;
  std::unique_ptr<encoder::auth::TokenAuthenticator> tokens;
  // The bearer-token rule every front applies.
  core::EdgeAuth edge_auth;
  // What every front calls; built before them and destroyed after them.
  std::unique_ptr<core::Inference> core;
  std::unique_ptr<encoder::service::EncoderServer> server;  // null: no gRPC
  std::unique_ptr<encoder::http::HttpFront> http;
  encoder::model::Repository repository;
  std::unique_ptr<encoder::runner::ModelHost> host;
  std::shared_ptr<encoder::ListenerWatch> watch;
};

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

// Raises the open file limit and sets a descriptor aside for accept.
void RaiseDescriptorLimits() {
  RaiseOpenFileLimit();
  if (!encoder::OpenAcceptReserve()) {
    spdlog::warn("no descriptor to hold in reserve for accept");
  }
}

// Picks the device, sizes the thread pools, starts the malloc trimmer and
// the CPU buffer cache, and fills the host options (precision included).
absl::Status ConfigureCompute(Process& p) {
  const encoder::ServeFlags& flags = p.flags;
  absl::StatusOr<at::Device> device = ParseDevice(flags.device);
  if (!device.ok()) return device.status();
  p.device = *device;
  const encoder::runner::UsableCores cores =
      encoder::runner::DetectUsableCores();
  const int executions = flags.executions_per_model > 0
                             ? flags.executions_per_model
                             : encoder::runner::DefaultExecutionsPerModel(
                                   p.device.is_cuda(), cores);
  const std::string threads = encoder::runner::ApplyThreadPolicy(
      flags.intra_op_threads > 0
          ? flags.intra_op_threads
          : encoder::runner::DefaultIntraOpThreads(cores, executions),
      flags.blas_threads);
  // Asked for, a CPU batch that runs alone takes every usable core for its
  // products, and batches side by side split them.
  std::string share = "intra-op threads fixed";
  const bool can_share = flags.intra_op_threads == 0 && !p.device.is_cuda();
  if (flags.share_intra_op == "true") {
    share = can_share ? encoder::runner::EnableIntraOpShare(cores.cores)
                      : std::string(
                            "intra-op threads fixed (--intra-op-threads "
                            "is set, or the device is a GPU)");
  } else if (flags.share_intra_op == "auto" && can_share) {
    share = encoder::runner::ShareIntraOpByDefault(cores)
                ? encoder::runner::EnableIntraOpShare(cores.cores)
                : absl::StrCat("intra-op threads fixed (", cores.cores,
                               " usable cores; --share-intra-op-threads=auto "
                               "shares with 2 or 3)");
  }
  if (!p.device.is_cuda()) {
    share = absl::StrCat(share, "; ",
                         encoder::runner::SetOneThreadBelowFlops(
                             flags.one_thread_below_mflop * 1e6));
  }
  const encoder::runner::IdleTrimOptions trim_options = flags.trim;
  p.trimmer = encoder::runner::IdleMallocTrimmer::Start(trim_options);
  spdlog::info("{}", p.trimmer
                         ? p.trimmer->Describe()
                         : std::string("free heap memory kept by malloc"));
  spdlog::info("{}", encoder::runner::InstallCpuBufferCache(
                         flags.cpu_buffer_cache_bytes));
  if (const std::string bad = encoder::model::CpuIsaCapError(); !bad.empty()) {
    return absl::InvalidArgumentError(bad);
  }
  p.cpu = &encoder::model::DetectCpuFeatures();
  spdlog::info("CPU {}: {}{}; {}; {}", p.cpu->model, p.cpu->Joined(),
               p.cpu->isa_cap.empty()
                   ? std::string()
                   : absl::StrCat(" (capped at ", p.cpu->isa_cap, ")"),
               threads, share);
  p.host_options = flags.host;
  p.host_options.device = p.device;
  p.host_options.batching.executions = executions;
  spdlog::info(
      "up to {} batches per model run at once{}",
      p.host_options.batching.executions,
      flags.executions_per_model > 0 ? " (--executions-per-model)" : "");
  return encoder::ApplyPrecisionFlags(p.precision, *p.cpu, &p.host_options);
}

// Prometheus metrics when there is an HTTP port to serve them, else none.
void CreateMetrics(Process& p) {
  if (p.flags.http_listen.empty()) return;
  const encoder::BuildInfo& build = encoder::GetBuildInfo();
  p.prometheus = encoder::metrics::PrometheusMetrics::Create();
  p.metrics = p.prometheus.get();
  p.metrics->BuildInfo(build.version, build.commit, build.libtorch,
                       build.compiler);
}

// Fills the server options: the memory limit and the gRPC memory quota and
// unread-response bounds derived from it, then the security flags.
absl::Status ConfigureServer(Process& p) {
  const encoder::ServeFlags& flags = p.flags;
  const bool grpc = !flags.server.listen.empty();
  if (!grpc && !p.security.health_listen.empty()) {
    return absl::InvalidArgumentError(
        "--health-listen serves grpc.health.v1 beside the gRPC port, and "
        "--listen is off; use the HTTP /health and /ready probes");
  }
  p.server_options = flags.server;
  p.server_options.max_send_message_bytes = flags.limits.max_send_message_bytes;
  std::string limit_source = "--memory-limit-bytes";
  p.memory_limit = flags.host.memory_limit_bytes > 0
                       ? flags.host.memory_limit_bytes
                       : encoder::batching::DetectMemoryLimit(&limit_source);
  p.grpc_quota = !grpc ? 0
                 : flags.grpc_memory_quota_bytes > 0
                     ? flags.grpc_memory_quota_bytes
                     : std::min<int64_t>(int64_t{1} << 30, p.memory_limit / 4);
  spdlog::info("memory limit {} MiB ({}), gRPC memory quota {} MiB",
               p.memory_limit >> 20, limit_source, p.grpc_quota >> 20);
  p.server_options.memory_quota_bytes = p.grpc_quota;
  p.flags.limits.unread.total_bytes =
      flags.max_unread_response_bytes > 0
          ? flags.max_unread_response_bytes
          : std::min<int64_t>(int64_t{1} << 30, p.memory_limit / 4);
  spdlog::info("unread responses held at most {} MiB, {} MiB per connection",
               p.flags.limits.unread.total_bytes >> 20,
               p.flags.limits.unread.per_connection_bytes >> 20);
  RETURN_IF_ERROR(
      encoder::ApplySecurityFlags(p.security, &p.server_options, &p.tokens));
  p.edge_auth =
      core::EdgeAuth{p.tokens.get(), p.security.auth_health, p.metrics};
  return absl::OkStatus();
}

// The core every front calls: calls are UNAVAILABLE until it has models.
void BuildCore(Process& p) {
  p.core = std::make_unique<core::Inference>(p.metrics, p.flags.limits,
                                             p.flags.diagnose);
}

// Binds the gRPC and health ports, unless --listen is off; health stays
// NOT_SERVING until the models are set.
absl::Status StartGrpc(Process& p) {
  if (p.server_options.listen.empty()) {
    spdlog::info("no gRPC port (--listen=off)");
    return absl::OkStatus();
  }
  auto server = encoder::service::EncoderServer::Start(
      p.server_options, p.core.get(), p.edge_auth);
  if (!server.ok()) return server.status();
  p.server = *std::move(server);
  spdlog::info("gRPC on port {} (health NOT_SERVING while loading)",
               p.server->port());
  return absl::OkStatus();
}

// Starts the HTTP front (embeddings, probes, /metrics) when --http-listen
// is set.
absl::Status StartHttp(Process& p) {
  if (p.flags.http_listen.empty()) return absl::OkStatus();
  const encoder::BuildInfo& build = encoder::GetBuildInfo();
  encoder::http::HttpFrontOptions http_options;
  http_options.http =
      encoder::MetricsHttpOptions(p.security, p.flags.http_listen);
  http_options.render_metrics = [prometheus = p.prometheus.get()] {
    return prometheus->Render();
  };
  http_options.api_docs = p.security.http_docs;
  http_options.git_commit = build.commit;
  http_options.build_type = build.build_type;
  http_options.libtorch_version = build.libtorch;
  http_options.grpc_version = grpc::Version();
  http_options.protobuf_version =
      google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION);
  auto started =
      encoder::http::HttpFront::Start(http_options, p.core.get(), p.edge_auth);
  if (!started.ok()) return started.status();
  p.http = *std::move(started);
  spdlog::info("HTTP (OpenAI embeddings, probes, metrics) on port {}",
               p.http->port());
  return absl::OkStatus();
}

// Resolves every --model-id (MODEL_ID when none) to a directory, through
// the Hugging Face cache, and adds it to --model-dir. Readiness says
// "downloading" meanwhile, and the log has a progress line at most every
// 2 s per model.
absl::Status FetchModels(Process& p) {
  std::vector<std::string> ids = p.flags.model_ids;
  if (ids.empty()) {
    const char* env = std::getenv("MODEL_ID");
    if (env != nullptr && *env != '\0') ids.push_back(env);
  }
  core::Inference* core = p.core.get();
  for (const std::string& flag : ids) {
    auto spec = encoder::ParseModelId(flag, p.flags.revision);
    if (!spec.ok()) return spec.status();
    encoder::hub::DownloadOptions options;
    options.cache_dir = p.flags.hub_cache;
    options.token = p.flags.tei.hf_token;
    options.token_file = p.flags.hf_token_file;
    options.offline = p.flags.hub_offline;
    const std::string id =
        spec->repo_id.empty()
            ? spec->dir
            : absl::StrCat(spec->repo_id, "@", spec->revision);
    const absl::Time start = absl::Now();
    absl::Time last_line = absl::InfinitePast();
    options.progress = [&](const encoder::hub::DownloadProgress& progress) {
      const absl::Time now = absl::Now();
      const std::string line = encoder::DescribeProgress(
          id, progress, absl::ToDoubleSeconds(now - start));
      core->SetStartupState("downloading", line);
      if (now - last_line >= absl::Seconds(2) && progress.total > 0) {
        spdlog::info("downloading {}", line);
        last_line = now;
      }
    };
    if (!spec->repo_id.empty()) {
      core->SetStartupState("downloading", id);
    }
    std::string warning;
    auto dir = encoder::FetchModel(*spec, options, &warning);
    if (!dir.ok()) return dir.status();
    if (!warning.empty()) spdlog::warn("{}", warning);
    if (!spec->repo_id.empty()) {
      spdlog::info("model {}: {} in {} ({:.1f} s)", spec->name, id, *dir,
                   absl::ToDoubleSeconds(absl::Now() - start));
    }
    p.flags.model_dirs.push_back(absl::StrCat(spec->name, "=", *dir));
  }
  core->SetStartupState("loading", "");
  return absl::OkStatus();
}

// Reads which models to serve (BuildRepository).
absl::Status ReadRepository(Process& p) {
  auto repository = encoder::BuildRepository(p.flags);
  if (!repository.ok()) return repository.status();
  p.repository = *std::move(repository);
  return absl::OkStatus();
}

// Gives the model host the memory limit, the bytes the transport reserves,
// and an observer that reports each model's batching to the metrics.
void ConfigureModelHost(Process& p) {
  p.host_options.memory_limit_bytes = p.memory_limit;
  p.host_options.reserved_bytes =
      p.grpc_quota + p.flags.limits.unread.total_bytes;
  p.host_options.make_observer = [metrics =
                                      p.metrics](const std::string& model) {
    encoder::batching::BatcherObserver o;
    o.on_batch = [metrics, model](const encoder::batching::BatchStats& b) {
      metrics->Batch(model, b.batch_size, b.padded_tokens, b.real_tokens);
    };
    o.on_dropped = [metrics, model](const char* reason, int64_t n) {
      metrics->Dropped(model, reason, n);
    };
    o.on_queue_depth = [metrics, model](int64_t depth) {
      metrics->QueueDepth(model, depth);
    };
    o.on_running = [metrics, model](int64_t batches) {
      metrics->RunningBatches(model, batches);
    };
    return o;
  };
}

// Lets /metrics read the CPU buffer cache and, on a GPU, its memory.
void AddResourceReaders(Process& p) {
  if (p.prometheus && encoder::runner::InstalledCpuBufferCacheStats()) {
    p.prometheus->SetCpuCacheReader([] {
      const encoder::runner::CpuBufferCacheStats stats =
          encoder::runner::InstalledCpuBufferCacheStats().value_or(
              encoder::runner::CpuBufferCacheStats{});
      return encoder::metrics::CpuCacheSample{stats.cached_bytes, stats.hits,
                                              stats.misses, stats.dropped};
    });
  }
  if (p.prometheus && p.device.is_cuda()) {
    p.prometheus->SetGpuMemoryReader(
        [](const std::string& name)
            -> absl::StatusOr<encoder::metrics::GpuMemory> {
          ASSIGN_OR_RETURN(auto memory,
                           encoder::runner::ReadDeviceMemory(name));
          return encoder::metrics::GpuMemory{memory.allocated_bytes,
                                             memory.reserved_bytes};
        });
  }
}

// Registers the CPU and every loaded model with the metrics (before the
// models are served, so that every series carries its model's labels from
// the first report on; checkpoint configs are known only once loaded) and
// logs each model.
void RegisterModels(Process& p) {
  p.metrics->CpuInfo(p.cpu->model, p.cpu->Joined());
  for (const auto& m : p.host->models()) {
    const encoder::api::ModelDescription& d = m->description();
    const encoder::model::ModelConfig& c = d.config;
    p.metrics->RegisterModel(
        {d.name, encoder::model::SchemeName(c.positional.type), p.device.str(),
         d.precision, c.d_model, c.num_heads, c.num_layers});
    if (!m->spec.unread_config_keys.empty()) {
      spdlog::warn(
          "model {}: keys no table classifies, not read by this server (a "
          "newer library may read them; see encoder-config-keys): {}",
          d.name, absl::StrJoin(m->spec.unread_config_keys, ", "));
    }
    for (const auto& trial : m->precision_trials) {
      spdlog::info("model {}: {}", d.name,
                   encoder::runner::DescribeTrial(trial));
    }
    const std::string linears =
        d.linear_kernel != encoder::api::LinearKernel::kPacked
            ? encoder::api::LinearKernelName(d.linear_kernel)
        : d.packed_max_rows == 0
            ? std::string("packed (every product)")
            : absl::StrCat("packed (up to ", d.packed_max_rows, " rows)");
    spdlog::info(
        "model {} ({} {}, {} layers, d={}, {} parameters) on {} in {}, "
        "linears {}",
        d.name, d.family, d.scheme.name, c.num_layers, c.d_model,
        d.parameter_count, d.device, d.precision, linears);
    if (!d.kernels.kernels.empty() || !d.kernels.onednn_isa.empty()) {
      std::vector<std::string> ran;
      for (const auto& k : d.kernels.kernels) ran.push_back(k.ToString());
      spdlog::info(
          "model {}: kernels (oneDNN isa: {}; MKL: {}): {}", d.name,
          d.kernels.onednn_isa.empty() ? "-" : d.kernels.onednn_isa,
          d.kernels.mkl_isa.empty() ? "-" : d.kernels.mkl_isa,
          ran.empty() ? "none of oneDNN's or MKL's" : absl::StrJoin(ran, "; "));
    }
    if (d.batching.work_per_second > 0) {
      spdlog::info(
          "model {}: {:.3g} compute units/s measured; attention statistics "
          "take {:.2f}x their priced compute here",
          d.name, d.batching.work_per_second,
          d.batching.compute_scale[encoder::batching::kStatisticsCompute]);
    }
    if (!d.batch_profile.points.empty()) {
      spdlog::info("model {}: batch profile: {}", d.name,
                   encoder::batching::DescribeProfile(d.batch_profile));
    }
  }
}

// The ports the process serves on, for the log.
std::string DescribePorts(const Process& p) {
  std::vector<std::string> ports;
  if (p.server) ports.push_back(absl::StrCat("gRPC ", p.server->port()));
  if (p.http) ports.push_back(absl::StrCat("HTTP ", p.http->port()));
  return absl::StrJoin(ports, ", ");
}

// Loads and warms every model, then hands them to the core and turns gRPC
// health SERVING.
absl::Status LoadModels(Process& p) {
  const absl::Time load_start = absl::Now();
  auto host = encoder::runner::ModelHost::Create(p.repository, p.host_options);
  if (!host.ok()) return host.status();
  p.host = *std::move(host);
  spdlog::info("batch memory budget {} MiB, shared by every model",
               p.host->batch_memory_budget_bytes() >> 20);
  RegisterModels(p);
  app::Serve({p.core.get(), p.host.get(), p.server.get()});
  spdlog::info("serving {} models on {} (loaded in {:.1f} s); default {}",
               p.host->models().size(), DescribePorts(p),
               absl::ToDoubleSeconds(absl::Now() - load_start),
               p.host->default_model());
  return absl::OkStatus();
}

// Starts watching the listening ports (WatchTransports). The watch is
// declared after the HTTP front in Process: it stops before it, and the
// metrics reader it installs is only called on the front's threads.
void WatchListeners(Process& p) {
  p.watch = WatchTransports(p.core.get(), p.server.get(), p.http.get(),
                            p.prometheus.get());
}

// Writes the ports to --ready-file, when set.
absl::Status AnnounceReady(const Process& p) {
  const std::string ready = p.flags.ready_file;
  if (!ready.empty() &&
      !WriteReadyFile(ready, p.server ? p.server->port() : 0,
                      p.http ? p.http->port() : 0,
                      p.server ? p.server->health_port() : 0)) {
    return absl::InternalError(absl::StrCat("cannot write ", ready));
  }
  return absl::OkStatus();
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

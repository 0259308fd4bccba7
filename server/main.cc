// encoder-server: flags -> options, wiring, signals, shutdown order.
//
// Start-up: bind gRPC (health NOT_SERVING) -> load and warm every model ->
// health SERVING -> write the ready file. SIGINT/SIGTERM: health
// NOT_SERVING, new calls UNAVAILABLE, accepted calls finish (bounded by
// --drain-grace-seconds), exit 0.
#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <sys/resource.h>

#include <cctype>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/accept_reserve.h"
#include "server/build_info.h"
#include "server/common/status_macros.h"
#include "server/http/http_front.h"
#include "server/listener_watch.h"
#include "server/logging/log.h"
#include "server/metrics/prometheus_metrics.h"
#include "server/model/dtype.h"
#include "server/model/model_repository.h"
#include "server/precision_flags.h"
#include "server/runner/cpu_buffer_cache.h"
#include "server/runner/device_memory.h"
#include "server/runner/idle_trim.h"
#include "server/runner/model_host.h"
#include "server/runner/thread_policy.h"
#include "server/security_flags.h"
#include "server/serve_flags.h"
#include "server/service/server.h"

namespace {

using encoder::runner::HostOptions;

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

}  // namespace

// Watches the listening ports (listener_watch.h): one that stops accepting
// marks the server unhealthy. Also gives /metrics the transport's counts.
std::shared_ptr<encoder::ListenerWatch> WatchTransports(
    encoder::service::EncoderServer* server, encoder::http::HttpFront* http,
    encoder::metrics::PrometheusMetrics* prometheus) {
  std::vector<encoder::ListenerWatch::Listener> listeners = {
      {"grpc", server->port()}, {"health", server->health_port()}};
  if (http != nullptr) listeners.push_back({"http", http->port()});
  auto watch = std::make_shared<encoder::ListenerWatch>(
      listeners, encoder::ListenerWatchOptions{},
      [server](const std::string& name) {
        server->MarkUnhealthy(absl::StrCat(
            "the ", name, " port stopped accepting connections; restart"));
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

int main(int argc, char** argv) {
  CLI::App app(
      "Serves Transformer encoders with selectable positional schemes over "
      "gRPC (encoder.v1.EncoderService), with health, reflection and "
      "Prometheus metrics.",
      "encoder-server");
  encoder::ServeFlags flags;
  encoder::DefineServeFlags(app, flags);
  encoder::SecurityFlags security;
  encoder::DefineSecurityFlags(app, security);
  encoder::PrecisionFlags precision;
  encoder::DefinePrecisionFlags(app, precision);
  app.set_version_flag("--version", encoder::VersionText(),
                       "print the version, git commit, build type, compiler "
                       "and LibTorch version, and exit");
  encoder::AddEnvironmentNames(app);
  app.footer(
      "Every option can also be set from the environment as ENCODER_<NAME>, "
      "the long name upper-cased with '-' as '_' (e.g. "
      "ENCODER_MAX_BATCH_TOKENS=8192 for --max-batch-tokens); the command "
      "line wins.");
  CLI11_PARSE(app, argc, argv);

  // Signals are taken by sigwait below; block them before any thread starts
  // (the logger's flusher included) so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

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

  RaiseOpenFileLimit();
  if (!encoder::OpenAcceptReserve()) {
    spdlog::warn("no descriptor to hold in reserve for accept");
  }
  auto device = ParseDevice(flags.device);
  if (!device.ok()) return Fail(device.status());
  const encoder::runner::UsableCores cores =
      encoder::runner::DetectUsableCores();
  const int executions = flags.executions_per_model > 0
                             ? flags.executions_per_model
                             : encoder::runner::DefaultExecutionsPerModel(
                                   device->is_cuda(), cores);
  const std::string threads = encoder::runner::ApplyThreadPolicy(
      flags.intra_op_threads > 0
          ? flags.intra_op_threads
          : encoder::runner::DefaultIntraOpThreads(cores, executions),
      flags.blas_threads);
  const encoder::runner::IdleTrimOptions trim_options = flags.trim;
  const std::unique_ptr<encoder::runner::IdleMallocTrimmer> trimmer =
      encoder::runner::IdleMallocTrimmer::Start(trim_options);
  spdlog::info("{}", trimmer ? trimmer->Describe()
                             : std::string("free heap memory kept by malloc"));
  spdlog::info("{}", encoder::runner::InstallCpuBufferCache(
                         flags.cpu_buffer_cache_bytes));
  const encoder::model::CpuFeatures& cpu = encoder::model::DetectCpuFeatures();
  spdlog::info("CPU {}: {}; {}", cpu.model, cpu.Joined(), threads);
  HostOptions host_options = flags.host;
  host_options.device = *device;
  host_options.batching.executions = executions;
  spdlog::info(
      "up to {} batches per model run at once{}",
      host_options.batching.executions,
      flags.executions_per_model > 0 ? " (--executions-per-model)" : "");
  if (absl::Status s =
          encoder::ApplyPrecisionFlags(precision, cpu, &host_options);
      !s.ok()) {
    return Fail(s);
  }

  encoder::metrics::NoopMetrics noop;
  std::unique_ptr<encoder::metrics::PrometheusMetrics> prometheus;
  encoder::metrics::Metrics* metrics = &noop;
  if (!flags.http_listen.empty()) {
    prometheus = encoder::metrics::PrometheusMetrics::Create();
    metrics = prometheus.get();
    metrics->BuildInfo(build.version, build.commit, build.libtorch,
                       build.compiler);
  }

  encoder::service::ServerOptions server_options = flags.server;
  std::string limit_source = "--memory-limit-bytes";
  const int64_t memory_limit =
      flags.host.memory_limit_bytes > 0
          ? flags.host.memory_limit_bytes
          : encoder::batching::DetectMemoryLimit(&limit_source);
  const int64_t grpc_quota =
      flags.grpc_memory_quota_bytes > 0
          ? flags.grpc_memory_quota_bytes
          : std::min<int64_t>(int64_t{1} << 30, memory_limit / 4);
  spdlog::info("memory limit {} MiB ({}), gRPC memory quota {} MiB",
               memory_limit >> 20, limit_source, grpc_quota >> 20);
  server_options.memory_quota_bytes = grpc_quota;
  server_options.unread.total_bytes =
      flags.max_unread_response_bytes > 0
          ? flags.max_unread_response_bytes
          : std::min<int64_t>(int64_t{1} << 30, memory_limit / 4);
  spdlog::info("unread responses held at most {} MiB, {} MiB per connection",
               server_options.unread.total_bytes >> 20,
               server_options.unread.per_connection_bytes >> 20);
  std::unique_ptr<encoder::auth::TokenAuthenticator> tokens;
  if (absl::Status applied =
          encoder::ApplySecurityFlags(security, &server_options, &tokens);
      !applied.ok()) {
    return Fail(applied);
  }
  auto server = encoder::service::EncoderServer::Start(server_options, metrics);
  if (!server.ok()) return Fail(server.status());
  spdlog::info("gRPC on port {} (health NOT_SERVING while loading)",
               (*server)->port());
  std::unique_ptr<encoder::http::HttpFront> http;
  if (!flags.http_listen.empty()) {
    encoder::http::HttpFrontOptions http_options;
    http_options.http =
        encoder::MetricsHttpOptions(security, flags.http_listen);
    http_options.render_metrics = [p = prometheus.get()] {
      return p->Render();
    };
    http_options.git_commit = build.commit;
    http_options.build_type = build.build_type;
    http_options.libtorch_version = build.libtorch;
    auto started = encoder::http::HttpFront::Start(http_options, server->get());
    if (!started.ok()) return Fail(started.status());
    http = *std::move(started);
    spdlog::info("HTTP (OpenAI embeddings, probes, metrics) on port {}",
                 http->port());
  }

  auto repository = encoder::BuildRepository(flags);
  if (!repository.ok()) return Fail(repository.status());

  host_options.memory_limit_bytes = memory_limit;
  host_options.reserved_bytes = grpc_quota + server_options.unread.total_bytes;
  host_options.make_observer = [metrics](const std::string& model) {
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
  if (prometheus && encoder::runner::InstalledCpuBufferCacheStats()) {
    prometheus->SetCpuCacheReader([] {
      const encoder::runner::CpuBufferCacheStats stats =
          encoder::runner::InstalledCpuBufferCacheStats().value_or(
              encoder::runner::CpuBufferCacheStats{});
      return encoder::metrics::CpuCacheSample{stats.cached_bytes, stats.hits,
                                              stats.misses, stats.dropped};
    });
  }
  if (prometheus && device->is_cuda()) {
    prometheus->SetGpuMemoryReader(
        [](const std::string& name)
            -> absl::StatusOr<encoder::metrics::GpuMemory> {
          ASSIGN_OR_RETURN(auto memory,
                           encoder::runner::ReadDeviceMemory(name));
          return encoder::metrics::GpuMemory{memory.allocated_bytes,
                                             memory.reserved_bytes};
        });
  }
  const absl::Time load_start = absl::Now();
  auto host = encoder::runner::ModelHost::Create(*repository, host_options);
  if (!host.ok()) return Fail(host.status());
  spdlog::info("batch memory budget {} MiB, shared by every model",
               (*host)->batch_memory_budget_bytes() >> 20);
  // Registered before the models are served, so that every series carries
  // its model's labels (checkpoint configs are known only once loaded) from
  // the first report on.
  metrics->CpuInfo(cpu.model, cpu.Joined());
  for (const auto& m : (*host)->models()) {
    const encoder::runner::ModelDescription& d = m->description();
    const encoder::model::ModelConfig& c = d.config;
    metrics->RegisterModel(
        {d.name, encoder::model::SchemeName(c.positional.type), device->str(),
         d.precision, c.d_model, c.num_heads, c.num_layers});
    for (const auto& trial : m->precision_trials) {
      spdlog::info("model {}: {}", d.name,
                   encoder::runner::DescribeTrial(trial));
    }
    spdlog::info("model {} ({} {}, {} layers, d={}, {} parameters) on {} in {}",
                 d.name, d.family, d.scheme.name, c.num_layers, c.d_model,
                 d.parameter_count, d.device, d.precision);
    if (!d.batch_profile.points.empty()) {
      spdlog::info("model {}: batch profile: {}", d.name,
                   encoder::batching::DescribeProfile(d.batch_profile));
    }
  }
  (*server)->SetModels(host->get());
  spdlog::info("serving {} models on port {} (loaded in {:.1f} s); default {}",
               (*host)->models().size(), (*server)->port(),
               absl::ToDoubleSeconds(absl::Now() - load_start),
               (*host)->default_model());
  // Declared after the HTTP front: stops before it, and the metrics reader
  // it installs is only called on the front's threads.
  std::shared_ptr<encoder::ListenerWatch> watch =
      WatchTransports(server->get(), http.get(), prometheus.get());
  const std::string ready = flags.ready_file;
  if (!ready.empty() &&
      !WriteReadyFile(ready, (*server)->port(), http ? http->port() : 0,
                      (*server)->health_port())) {
    return Fail(absl::InternalError(absl::StrCat("cannot write ", ready)));
  }

  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
    if (!tokens) continue;
    const absl::Status reloaded = tokens->Reload();
    if (reloaded.ok()) {
      spdlog::info("SIGHUP: {} bearer tokens in force", tokens->token_count());
    } else {
      spdlog::error("SIGHUP: {}; the previous tokens stay in force",
                    reloaded.ToString());
    }
  }
  spdlog::info("signal {}: draining (grace {} s)", signal_number,
               flags.drain_grace_seconds);
  const bool drained =
      (*server)->Drain(absl::Seconds(flags.drain_grace_seconds),
                       absl::Seconds(flags.drain_unready_seconds));
  spdlog::info(drained ? "drained; exiting"
                       : "grace period over with work left; exiting");
  if (prometheus) prometheus->SetConnectionReader(nullptr);
  watch.reset();
  http.reset();
  server->reset();
  host->reset();
  return 0;
}

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
#include "server/service/http_front.h"
#include "server/service/server.h"

namespace {

const encoder::batching::BatchOptions kBatchDefaults{};
const encoder::service::DiagnoseLimits kDiagnoseDefaults{};

// Every flag, with its default; filled by ParseFlags and read only here.
struct Flags {
  std::string listen = "127.0.0.1:50051";
  std::string http_listen;
  std::string models;
  std::vector<std::string> model_dirs;
  std::string model_dir_pooling;
  std::string device = "auto";
  int intra_op_threads = 1;
  int blas_threads = 0;
  int64_t cpu_buffer_cache_bytes = encoder::runner::kDefaultCpuBufferCacheBytes;
  int64_t malloc_trim_idle_ms = 1000;
  int64_t max_receive_message_bytes =
      encoder::service::kDefaultMaxReceiveMessageBytes;
  int64_t max_send_message_bytes =
      encoder::service::kDefaultMaxSendMessageBytes;
  int64_t max_inputs_per_request =
      encoder::service::kDefaultMaxInputsPerRequest;
  int64_t grpc_memory_quota_bytes = 0;
  int64_t memory_limit_bytes = 0;
  int64_t batch_memory_budget_bytes = 0;
  int max_concurrent_streams =
      encoder::service::ServerOptions{}.max_concurrent_streams;
  int64_t max_unread_response_bytes = 0;
  int64_t max_unread_response_bytes_per_connection =
      encoder::service::UnreadLimits{}.per_connection_bytes;
  // The batching defaults live in batching::BatchOptions.
  int64_t max_batch_sequences = kBatchDefaults.max_batch_sequences;
  int64_t max_batch_tokens = kBatchDefaults.max_batch_tokens;
  int64_t max_queue_delay_us =
      absl::ToInt64Microseconds(kBatchDefaults.max_queue_delay);
  int64_t max_queued_sequences = kBatchDefaults.max_queued_sequences;
  bool fair_share = kBatchDefaults.fair_share;
  double drain_grace_seconds = 20;
  double drain_unready_seconds = 1;
  int64_t max_diagnose_tokens = kDiagnoseDefaults.max_tokens;
  int64_t max_structure_positions = kDiagnoseDefaults.max_structure_positions;
  int64_t max_extrapolation_tokens = kDiagnoseDefaults.max_extrapolation_tokens;
  int64_t max_pending_diagnose = kDiagnoseDefaults.max_pending;
  bool warm_up = true;
  int64_t batch_profile_ms = 0;
  std::string ready_file;
  std::string log_level = "info";
  std::string log_format = "text";
  int64_t log_rate_limit = 10;
};

// The models to serve: the repository file's and the --model-dir ones, or
// the built-in set when neither is given.
absl::StatusOr<encoder::model::Repository> BuildRepository(const Flags& f) {
  encoder::model::Repository repo;
  if (!f.models.empty()) {
    ASSIGN_OR_RETURN(auto read, encoder::model::ReadRepository(f.models));
    repo = std::move(read);
  } else if (f.model_dirs.empty()) {
    return encoder::model::BuiltinRepository();
  }
  std::optional<encoder::model::Pooling> pooling;
  if (!f.model_dir_pooling.empty()) {
    ASSIGN_OR_RETURN(auto p,
                     encoder::model::ParsePoolingName(f.model_dir_pooling));
    pooling = p;
  }
  for (const std::string& flag : f.model_dirs) {
    ASSIGN_OR_RETURN(auto spec, encoder::model::ModelDirSpec(flag));
    spec.pooling = pooling;
    for (const auto& existing : repo.models) {
      if (existing.name == spec.name) {
        return absl::InvalidArgumentError(
            absl::StrCat("two models are named \"", spec.name,
                         "\"; name them with --model-dir NAME=DIR"));
      }
    }
    repo.models.push_back(std::move(spec));
  }
  if (repo.default_model.empty()) repo.default_model = repo.models[0].name;
  return repo;
}

void DefineFlags(CLI::App& app, Flags& f) {
  app.add_option("--listen", f.listen,
                 "gRPC listen address HOST:PORT (port 0 picks a free port)")
      ->capture_default_str();
  app.add_option("--http-listen,--metrics-listen", f.http_listen,
                 "HTTP port HOST:PORT (\":PORT\" binds --http-address): "
                 "OpenAI-compatible /v1/embeddings, /v1/models, /health, "
                 "/ready, /info and Prometheus /metrics; empty: no HTTP port "
                 "and no metrics");
  app.add_option("--models,--repository", f.models,
                 "model repository JSON file; with no --model-dir either, "
                 "the built-in models (none, sinusoidal, learned, rope, "
                 "alibi, relative) are served");
  app.add_option("--model-dir", f.model_dirs,
                 "Hugging Face checkpoint directory, DIR or NAME=DIR "
                 "(repeatable; the name defaults to DIR's base name)");
  app.add_option("--model-dir-pooling", f.model_dir_pooling,
                 "pooling for --model-dir models: mean | first | max | "
                 "last_token | weighted_mean; empty: the checkpoint's "
                 "sentence-transformers choice, else mean");
  app.add_option("--device", f.device, "auto | cpu | cuda | cuda:N")
      ->capture_default_str();
  app.add_option("--intra-op-threads", f.intra_op_threads,
                 "LibTorch intra-op threads")
      ->capture_default_str();
  app.add_option("--blas-threads", f.blas_threads,
                 "OpenBLAS's thread pool when LibTorch uses OpenBLAS; 0: "
                 "OpenBLAS's own choice (every core)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--cpu-buffer-cache-bytes", f.cpu_buffer_cache_bytes,
                 "freed CPU tensor buffers of 256 KiB or more kept for reuse "
                 "by the next batches, up to this many bytes (saves the "
                 "page faults of re-mapping them); 0: off")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--malloc-trim-idle-ms", f.malloc_trim_idle_ms,
                 "once the process has been quiet (under 5% of a core) this "
                 "long after doing work, free heap memory goes back to the "
                 "system, so the resident set falls after a burst; 0: never")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-receive-message-bytes", f.max_receive_message_bytes,
                 "largest request message accepted")
      ->capture_default_str();
  app.add_option("--max-send-message-bytes", f.max_send_message_bytes,
                 "largest response; larger ones are refused before compute "
                 "with RESOURCE_EXHAUSTED")
      ->capture_default_str();
  app.add_option("--max-inputs-per-request", f.max_inputs_per_request,
                 "inputs per Embed request")
      ->capture_default_str();
  app.add_option("--memory-limit-bytes", f.memory_limit_bytes,
                 "memory the process may use; 0: the cgroup limit, else the "
                 "machine's RAM. The defaults below derive from it")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50))
      ->capture_default_str();
  app.add_option("--batch-memory-budget-bytes", f.batch_memory_budget_bytes,
                 "bytes the running batches of all models (and Diagnose) may "
                 "hold at once; inputs that alone need more are refused with "
                 "RESOURCE_EXHAUSTED. 0: half of what the memory limit "
                 "leaves after the loaded models and the gRPC quota")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50))
      ->capture_default_str();
  app.add_option("--grpc-memory-quota-bytes", f.grpc_memory_quota_bytes,
                 "memory gRPC may hold for all connections' buffers (its "
                 "resource quota); readers back off beyond it. 0: a quarter "
                 "of the memory limit, at most 1 GiB")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--max-unread-response-bytes", f.max_unread_response_bytes,
                 "bytes of responses that clients have not yet read which "
                 "the server holds at most; beyond it new calls are refused "
                 "with RESOURCE_EXHAUSTED until clients read. 0: a quarter "
                 "of the memory limit, at most 1 GiB")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--max-unread-response-bytes-per-connection",
                 f.max_unread_response_bytes_per_connection,
                 "the same, per client connection: a client that stops "
                 "reading gets RESOURCE_EXHAUSTED for new calls on its "
                 "connection once this much waits for it")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--max-concurrent-streams", f.max_concurrent_streams,
                 "calls in flight per client connection (HTTP/2 "
                 "SETTINGS_MAX_CONCURRENT_STREAMS); further calls wait")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-batch-sequences", f.max_batch_sequences,
                 "sequences per forward pass")
      ->capture_default_str();
  app.add_option("--max-batch-tokens", f.max_batch_tokens,
                 "longest length x sequences per forward pass")
      ->capture_default_str();
  app.add_option("--max-queue-delay-us", f.max_queue_delay_us,
                 "how long the oldest queued sequence may wait for company")
      ->capture_default_str();
  app.add_option("--max-queued-sequences", f.max_queued_sequences,
                 "queued sequences per model beyond which calls fail at once "
                 "with RESOURCE_EXHAUSTED")
      ->capture_default_str();
  app.add_flag("--fair-share,!--no-fair-share", f.fair_share,
               "interleave requests in batches (every queued request's "
               "oldest sequence before further ones), so a small call waits "
               "about one batch behind a large request; off: strict arrival "
               "order")
      ->capture_default_str();
  app.add_option("--drain-grace-seconds", f.drain_grace_seconds,
                 "on SIGTERM/SIGINT, how long accepted calls may take")
      ->capture_default_str();
  app.add_option("--drain-unready-seconds", f.drain_unready_seconds,
                 "on SIGTERM/SIGINT, how long new calls keep getting "
                 "UNAVAILABLE (health NOT_SERVING) before the transport "
                 "closes, so balancers move traffic away first")
      ->capture_default_str();
  app.add_option("--max-diagnose-tokens", f.max_diagnose_tokens,
                 "input length accepted by Diagnose")
      ->capture_default_str();
  app.add_option("--max-structure-positions", f.max_structure_positions,
                 "positions N of Diagnose's Gram and bias matrices")
      ->capture_default_str();
  app.add_option("--max-pending-diagnose", f.max_pending_diagnose,
                 "Diagnose calls waiting or running at once, across models; "
                 "more are refused with RESOURCE_EXHAUSTED")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-extrapolation-tokens", f.max_extrapolation_tokens,
                 "longest input Diagnose's extrapolation probe runs (a "
                 "repository entry's max_extrapolation_tokens overrides it)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--warm-up,!--no-warm-up", f.warm_up,
               "run one forward per model before serving")
      ->capture_default_str();
  app.add_option("--batch-profile-ms", f.batch_profile_ms,
                 "time each distinct model shape may spend at start-up "
                 "measuring sequences/s by batch size and length; batches "
                 "are then capped where bigger ones ran slower (0: fixed "
                 "caps only)")
      ->check(CLI::Range(int64_t{0}, int64_t{600000}))
      ->capture_default_str();
  app.add_option("--ready-file", f.ready_file,
                 "once serving, write {\"grpc_port\": P, \"http_port\": "
                 "W, \"metrics_port\": W, \"health_port\": H} here "
                 "(atomically)");
  app.add_option("--log-level", f.log_level,
                 "trace | debug | info | warn | error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
  app.add_option("--log-format", f.log_format,
                 "text | json (one JSON object per line: ts, level, msg and "
                 "each access-log field as a key)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--log-rate-limit", f.log_rate_limit,
                 "warning and error lines of one kind (same message, or same "
                 "method, status and error for access lines) logged per "
                 "second at most; the rest are counted in a \"suppressed K "
                 "similar log lines\" line. 0: no limit")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
}

// Every option can also come from ENCODER_<NAME>, the long name upper-cased
// with '-' as '_' (--max-batch-tokens: ENCODER_MAX_BATCH_TOKENS). CLI11
// reads the variable only when the option is not on the command line.
void AddEnvironmentNames(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string& name = option->get_single_name();
    if (name.empty() || name == "help" || name == "version") continue;
    std::string env = "ENCODER_";
    for (char c : name) {
      env.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
    }
    option->envname(env);
  }
}

}  // namespace

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

int main(int argc, char** argv) {
  CLI::App app(
      "Serves Transformer encoders with selectable positional schemes over "
      "gRPC (encoder.v1.EncoderService), with health, reflection and "
      "Prometheus metrics.",
      "encoder-server");
  Flags flags;
  DefineFlags(app, flags);
  encoder::SecurityFlags security;
  encoder::DefineSecurityFlags(app, security);
  encoder::PrecisionFlags precision;
  encoder::DefinePrecisionFlags(app, precision);
  app.set_version_flag("--version", encoder::VersionText(),
                       "print the version, git commit, build type, compiler "
                       "and LibTorch version, and exit");
  AddEnvironmentNames(app);
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

  encoder::logging::LogOptions log_options;
  log_options.format = flags.log_format == "json"
                           ? encoder::logging::LogFormat::kJson
                           : encoder::logging::LogFormat::kText;
  log_options.level = spdlog::level::from_str(flags.log_level);
  log_options.rate_limit_per_second = flags.log_rate_limit;
  encoder::logging::SetupLogging(log_options);
  const encoder::BuildInfo& build = encoder::GetBuildInfo();
  spdlog::info("encoder-server {} (commit {}, {}, {}, LibTorch {})",
               build.version, build.commit, build.build_type, build.compiler,
               build.libtorch);

  RaiseOpenFileLimit();
  if (!encoder::OpenAcceptReserve()) {
    spdlog::warn("no descriptor to hold in reserve for accept");
  }
  const std::string threads = encoder::runner::ApplyThreadPolicy(
      flags.intra_op_threads, flags.blas_threads);
  encoder::runner::IdleTrimOptions trim_options;
  trim_options.idle_ms = flags.malloc_trim_idle_ms;
  const std::unique_ptr<encoder::runner::IdleMallocTrimmer> trimmer =
      encoder::runner::IdleMallocTrimmer::Start(trim_options);
  spdlog::info("{}", trimmer ? trimmer->Describe()
                             : std::string("free heap memory kept by malloc"));
  spdlog::info("{}", encoder::runner::InstallCpuBufferCache(
                         flags.cpu_buffer_cache_bytes));
  auto device = ParseDevice(flags.device);
  if (!device.ok()) return Fail(device.status());
  const encoder::model::CpuFeatures& cpu = encoder::model::DetectCpuFeatures();
  spdlog::info("CPU {}: {}; {}", cpu.model, cpu.Joined(), threads);
  HostOptions host_options;
  host_options.device = *device;
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

  encoder::service::ServerOptions server_options;
  server_options.listen = flags.listen;
  server_options.max_receive_message_bytes = flags.max_receive_message_bytes;
  server_options.max_send_message_bytes = flags.max_send_message_bytes;
  server_options.max_inputs_per_request = flags.max_inputs_per_request;
  std::string limit_source = "--memory-limit-bytes";
  const int64_t memory_limit =
      flags.memory_limit_bytes > 0
          ? flags.memory_limit_bytes
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
  server_options.unread.per_connection_bytes =
      flags.max_unread_response_bytes_per_connection;
  spdlog::info("unread responses held at most {} MiB, {} MiB per connection",
               server_options.unread.total_bytes >> 20,
               server_options.unread.per_connection_bytes >> 20);
  server_options.max_concurrent_streams = flags.max_concurrent_streams;
  server_options.diagnose.max_tokens = flags.max_diagnose_tokens;
  server_options.diagnose.max_structure_positions =
      flags.max_structure_positions;
  server_options.diagnose.max_extrapolation_tokens =
      flags.max_extrapolation_tokens;
  server_options.diagnose.max_pending = flags.max_pending_diagnose;
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
  std::unique_ptr<encoder::service::HttpFront> http;
  if (!flags.http_listen.empty()) {
    encoder::service::HttpFrontOptions http_options;
    http_options.http =
        encoder::MetricsHttpOptions(security, flags.http_listen);
    http_options.render_metrics = [p = prometheus.get()] {
      return p->Render();
    };
    http_options.git_commit = build.commit;
    http_options.build_type = build.build_type;
    http_options.libtorch_version = build.libtorch;
    auto started =
        encoder::service::HttpFront::Start(http_options, server->get());
    if (!started.ok()) return Fail(started.status());
    http = *std::move(started);
    spdlog::info("HTTP (OpenAI embeddings, probes, metrics) on port {}",
                 http->port());
  }

  auto repository = BuildRepository(flags);
  if (!repository.ok()) return Fail(repository.status());

  host_options.warm_up = flags.warm_up;
  host_options.batch_profile_budget =
      absl::Milliseconds(flags.batch_profile_ms);
  host_options.memory_limit_bytes = memory_limit;
  host_options.batch_memory_budget_bytes = flags.batch_memory_budget_bytes;
  host_options.reserved_bytes = grpc_quota + server_options.unread.total_bytes;
  host_options.batching.max_batch_sequences = flags.max_batch_sequences;
  host_options.batching.max_batch_tokens = flags.max_batch_tokens;
  host_options.batching.max_queue_delay =
      absl::Microseconds(flags.max_queue_delay_us);
  host_options.batching.max_queued_sequences = flags.max_queued_sequences;
  host_options.batching.fair_share = flags.fair_share;
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
  for (const auto& m : (*host)->models()) {
    const auto& c = m->spec.config;
    metrics->RegisterModel(
        {m->spec.name, encoder::model::SchemeName(c.positional.type),
         device->str(), encoder::runner::PrecisionName(*m->encoder), c.d_model,
         c.num_heads, c.num_layers});
    metrics->CpuInfo(cpu.model, cpu.Joined());
    for (const auto& trial : m->precision_trials) {
      spdlog::info("model {}: {}", m->spec.name,
                   encoder::runner::DescribeTrial(trial));
    }
  }
  for (const encoder::runner::ServedModel* m : (*host)->List()) {
    const encoder::runner::ModelDescription& d = m->description();
    spdlog::info("model {} ({} {}, {} layers, d={}, {} parameters) on {} in {}",
                 d.name, d.family, d.scheme.name, d.config.num_layers,
                 d.config.d_model, d.parameter_count, d.device, d.precision);
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
  http.reset();
  server->reset();
  host->reset();
  return 0;
}

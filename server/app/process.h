// What encoder-server's start-up builds (Process), and its steps, in the
// order app.cc runs them: start_compute.cc, start_fronts.cc and
// start_models.cc hold them.
#ifndef ENCODER_SERVER_APP_PROCESS_H_
#define ENCODER_SERVER_APP_PROCESS_H_

#include <c10/core/Device.h>

#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/app/listener_watch.h"
#include "server/app/precision_flags.h"
#include "server/app/security_flags.h"
#include "server/app/serve_flags.h"
#include "server/app/tracing_flags.h"
#include "server/core/edge_auth.h"
#include "server/core/inference.h"
#include "server/http/http_front.h"
#include "server/metrics/prometheus_metrics.h"
#include "server/model/kernels/cpu_features.h"
#include "server/model/weights/model_repository.h"
#include "server/runner/idle_trim.h"
#include "server/runner/model_host.h"
#include "server/service/server.h"

namespace encoder::app {

// What start-up builds, shared by the steps below. Members are declared in
// start-up order, so they are destroyed in the reverse order.
struct Process {
  encoder::ServeFlags flags;
  // Lines about the command line to log once logging is set up.
  std::vector<std::string> flag_notes;
  encoder::SecurityFlags security;
  encoder::PrecisionFlags precision;
  encoder::TracingFlags tracing;
  sigset_t signals{};
  at::Device device = at::kCPU;
  std::unique_ptr<encoder::runner::IdleMallocTrimmer> trimmer;
  const encoder::model::CpuFeatures* cpu = nullptr;
  runner::HostOptions host_options;
  encoder::metrics::NoopMetrics noop;
  std::unique_ptr<encoder::metrics::PrometheusMetrics> prometheus;
  encoder::metrics::Metrics* metrics = &noop;  // prometheus when it exists
  // Installed for the fronts (tracing::Installed) while they serve.
  std::unique_ptr<encoder::tracing::Tracer> tracer;
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

// Raises the open file limit and sets a descriptor aside for accept.
void RaiseDescriptorLimits();

// Picks the device, sizes the thread pools, starts the malloc trimmer and
// the CPU buffer cache, and fills the host options (precision included).
absl::Status ConfigureCompute(Process& p);

// Prometheus metrics when there is an HTTP port to serve them, else none.
void CreateMetrics(Process& p);

// Fills the server options: the memory limit and the gRPC memory quota and
// unread-response bounds derived from it, then the security flags.
absl::Status ConfigureServer(Process& p);

// The tracer --otlp-endpoint asks for, installed for the fronts; none when
// it is off.
absl::Status StartTracing(Process& p);

// The core every front calls: calls are UNAVAILABLE until it has models.
void BuildCore(Process& p);

// Binds the gRPC and health ports, unless --listen is off; health stays
// NOT_SERVING until the models are set.
absl::Status StartGrpc(Process& p);

// Starts the HTTP front (embeddings, probes, /metrics) when --http-listen
// is set.
absl::Status StartHttp(Process& p);

// Resolves every --model-id (MODEL_ID when none) to a directory, through
// the Hugging Face cache, and adds it to --model-dir. Readiness says
// "downloading" meanwhile, and the log has a progress line at most every
// 2 s per model.
absl::Status FetchModels(Process& p);

// Reads which models to serve (BuildRepository).
absl::Status ReadRepository(Process& p);

// Gives the model host the memory limit, the bytes the transport reserves,
// and an observer that reports each model's batching to the metrics.
void ConfigureModelHost(Process& p);

// Lets /metrics read the CPU buffer cache and, on a GPU, its memory.
void AddResourceReaders(Process& p);

// Loads and warms every model, then hands them to the core and turns gRPC
// health SERVING.
absl::Status LoadModels(Process& p);

// Starts watching the listening ports (WatchTransports). The watch is
// declared after the HTTP front in Process: it stops before it, and the
// metrics reader it installs is only called on the front's threads.
void WatchListeners(Process& p);

// Writes the ports to --ready-file, when set.
absl::Status AnnounceReady(const Process& p);

}  // namespace encoder::app

#endif  // ENCODER_SERVER_APP_PROCESS_H_

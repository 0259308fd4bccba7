// Start-up's front steps (process.h): the metrics, the server options and
// the bearer-token rule, the core, the gRPC and HTTP fronts, the listener
// watch and the ready file.
#include "server/app/process.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/common.h"
#include "server/app/accept_reserve.h"
#include "server/app/build_info.h"
#include "server/common/status_macros.h"

namespace encoder::app {
namespace {

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

}  // namespace

void CreateMetrics(Process& p) {
  if (p.flags.http_listen.empty()) return;
  const encoder::BuildInfo& build = encoder::GetBuildInfo();
  p.prometheus = encoder::metrics::PrometheusMetrics::Create();
  p.metrics = p.prometheus.get();
  p.metrics->BuildInfo(build.version, build.commit, build.libtorch,
                       build.compiler);
}

absl::Status StartTracing(Process& p) {
  auto tracer = encoder::BuildTracer(p.tracing, encoder::GetBuildInfo().version,
                                     p.metrics);
  if (!tracer.ok()) return tracer.status();
  p.tracer = *std::move(tracer);
  if (p.tracer == nullptr) return absl::OkStatus();
  encoder::tracing::Install(p.tracer.get());
  spdlog::info("traces: {}", p.tracer->Describe());
  return absl::OkStatus();
}

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

void BuildCore(Process& p) {
  p.core = std::make_unique<core::Inference>(p.metrics, p.flags.limits,
                                             p.flags.diagnose);
}

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

void WatchListeners(Process& p) {
  p.watch = WatchTransports(p.core.get(), p.server.get(), p.http.get(),
                            p.prometheus.get());
}

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

}  // namespace encoder::app

// Start-up's model steps (process.h): --model-id fetched from the Hub, the
// repository read, the models loaded, registered with the metrics and
// handed to the core.
#include "server/app/process.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/app/drain.h"
#include "server/app/model_ids.h"
#include "server/common/status_macros.h"
#include "server/runner/cpu_buffer_cache.h"
#include "server/runner/device_memory.h"

namespace encoder::app {
namespace {

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
         encoder::model::PrecisionName(d.precision), c.d_model, c.num_heads,
         c.num_layers});
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
            : absl::StrCat(
                  "packed (",
                  d.packed_max_rows == 0
                      ? std::string("every product")
                      : absl::StrCat("up to ", d.packed_max_rows, " rows"),
                  d.packed_min_elements > 0
                      ? absl::StrCat(", weights of ", d.packed_min_elements,
                                     " elements or more")
                      : std::string(),
                  ")");
    spdlog::info(
        "model {} ({} {}, {} layers, d={}, {} parameters) on {} in {}, "
        "linears {}",
        d.name, d.family, d.scheme.name, c.num_layers, c.d_model,
        d.parameter_count, d.device, encoder::model::PrecisionName(d.precision),
        linears);
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

}  // namespace

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

absl::Status ReadRepository(Process& p) {
  auto repository = encoder::BuildRepository(p.flags);
  if (!repository.ok()) return repository.status();
  p.repository = *std::move(repository);
  return absl::OkStatus();
}

void ConfigureModelHost(Process& p) {
  p.host_options.memory_limit_bytes = p.memory_limit;
  p.host_options.reserved_bytes =
      p.grpc_quota + p.flags.limits.unread.total_bytes;
  p.host_options.make_observer =
      [metrics = p.metrics, tracer = p.tracer.get()](const std::string& model) {
        encoder::batching::BatcherObserver o;
        o.on_batch = [metrics, tracer,
                      model](const encoder::batching::BatchStats& b) {
          metrics->Batch(model, b.batch_size, b.padded_tokens, b.real_tokens);
          if (tracer != nullptr) tracer->RecordBatch(model, b);
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

}  // namespace encoder::app

// In-process baseline for the serving benchmark: the same model the server
// hosts, forward only (no gRPC, no queue), at given batch sizes. Prints one
// JSON object with sequences/s and latency per batch size.
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "server/model/dtype.h"
#include "server/model/kernels/cpu_features.h"
#include "server/model/kernels/packed_linear.h"
#include "server/model/weights/model_repository.h"
#include "server/runner/cpu_buffer_cache.h"
#include "server/runner/encoder_runner.h"
#include "server/runner/idle_trim.h"
#include "server/runner/thread_policy.h"

namespace {

struct Options {
  std::string model = "sinusoidal";
  std::string repository;
  std::vector<int64_t> batch_sizes = {1, 2, 4, 8, 16, 32};
  int64_t length = 16;
  // Lengths drawn uniformly from [min_length, length]; 0: all `length`.
  int64_t min_length = 0;
  // As the server's flag; with compare_grid, runs at this share alternate
  // forward by forward with runs that compute every padded position, and
  // the ratio is printed.
  double skip_padding_min_share = encoder::model::kDefaultSkipPaddingMinShare;
  bool compare_grid = false;
  // Attention without maps through the fused kernel (the server's
  // --fused-attention); with compare_explicit, runs alternate forward by
  // forward with the explicit products, and the ratio is printed.
  bool fused_attention = true;
  bool compare_explicit = false;
  // Also time the model's linear layers alone on the same tokens and dtype,
  // and print the forward's rate as a share of the rate they allow.
  bool linear_bound = false;
  double seconds_per_size = 3;
  int intra_op_threads = 1;
  int executions = 1;
  std::string device = "cpu";
  std::string dtype = "float32";
  std::string quantize = "none";
  int64_t int8_float_channels = encoder::model::kDefaultInt8FloatChannels;
  int64_t int8_row_outliers = 0;
  std::string int8_attention = "auto";
  std::string bf16_attention = "auto";
  std::string pack_weights = "auto";
  int64_t packed_max_rows = -1;
  int64_t packed_min_elements = -1;
  // Idle time before each timed forward, as a server sees between calls.
  int64_t pause_us = 0;
  // The server's allocator setting, so that in-process and served runs
  // reuse (or map afresh) their large buffers alike.
  int64_t cpu_buffer_cache_bytes = encoder::runner::kDefaultCpuBufferCacheBytes;
  // The server's: with idle trimming on (its default), glibc keeps freed
  // memory mapped under load (IdleMallocTrimmer::HoldFreed).
  bool hold_freed = true;
};

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Seconds one forward's linear layers take alone on `tokens` rows: every
// layer's four products (q/k/v, output, the feed-forward pair) with the
// model's shapes, in `dtype`, on random weights, timed over ~`seconds`.
// A layer's projections as {rows of the weight, its input width}, as
// x [tokens, in] -> [tokens, rows].
std::vector<std::pair<int64_t, int64_t>> LinearShapes(
    const encoder::model::ModelConfig& config) {
  const int64_t d = config.d_model, a = config.num_heads * config.head_dim();
  const int64_t f = config.d_ff, f_in = config.arch.gated_ffn ? 2 * f : f;
  return {{3 * a, d}, {d, a}, {f_in, d}, {d, f}};
}

double LinearSeconds(const encoder::model::ModelConfig& config, int64_t tokens,
                     at::ScalarType dtype, const at::Device& device,
                     double seconds) {
  c10::InferenceMode guard;
  const auto opts = at::TensorOptions().dtype(dtype).device(device);
  const std::vector<std::pair<int64_t, int64_t>> shapes = LinearShapes(config);
  std::vector<at::Tensor> weights, inputs;
  // The same products on weights packed once (oneDNN's blocked layout, no
  // repacking per call), where the CPU build has them: the faster of the
  // two is the bound, whichever the forward runs.
  std::vector<encoder::model::PackedLinear> packed;
  const bool can_pack = device.is_cpu() &&
                        (dtype == at::kFloat || dtype == at::kBFloat16) &&
                        encoder::model::PackedLinearSupported();
  for (const auto& [rows, in] : shapes) {
    weights.push_back(at::randn({rows, in}, opts));
    inputs.push_back(at::randn({tokens, in}, opts));
    if (can_pack) {
      packed.push_back(*encoder::model::PackedLinear::Create(
          weights.back(), at::Tensor(),
          encoder::model::PackedLinear::kEveryProduct));
    }
  }
  auto time_per_forward = [&](bool use_packed) {
    auto one_forward = [&] {
      at::Tensor last;
      for (int64_t layer = 0; layer < config.num_layers; ++layer) {
        for (size_t i = 0; i < shapes.size(); ++i) {
          last = use_packed ? packed[i].Forward(inputs[i])
                            : at::linear(inputs[i], weights[i]);
        }
      }
      // On a GPU, wait for the queued products, as the forward does when it
      // copies its result out.
      if (device.is_cuda()) last.sum().item<float>();
    };
    one_forward();
    int64_t runs = 0;
    const double start = Now();
    while (Now() - start < seconds || runs < 5) {
      one_forward();
      ++runs;
    }
    return (Now() - start) / static_cast<double>(runs);
  };
  const double plain = time_per_forward(false);
  return can_pack ? std::min(plain, time_per_forward(true)) : plain;
}

// Multiply-adds x 2 of the products LinearSeconds times, per sequence of
// `tokens` tokens.
double LinearFlops(const encoder::model::ModelConfig& config, int64_t tokens) {
  double per_token = 0;
  for (const auto& [rows, in] : LinearShapes(config)) {
    per_token += 2.0 * static_cast<double>(rows) * static_cast<double>(in);
  }
  return per_token * static_cast<double>(tokens) *
         static_cast<double>(config.num_layers);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Forward-only throughput of one model at several batch sizes",
               "encoder-bench-forward");
  Options o;
  app.add_option("--model", o.model, "model name")->capture_default_str();
  app.add_option("--models", o.repository,
                 "model repository file (default: built-in models)");
  app.add_option("--batch-sizes", o.batch_sizes, "batch sizes to measure")
      ->delimiter(',');
  app.add_option("--length", o.length, "tokens per sequence")
      ->capture_default_str();
  app.add_option("--min-length", o.min_length,
                 "shortest sequence: lengths uniform in [min, --length] "
                 "(0: every sequence --length tokens)")
      ->capture_default_str();
  app.add_option("--skip-padding-min-share", o.skip_padding_min_share,
                 "as the server's flag (1: never skip padded positions)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_flag("--compare-grid", o.compare_grid,
               "alternate each forward with one at --skip-padding-min-share=1 "
               "and print the ratio");
  app.add_flag("--fused-attention,!--no-fused-attention", o.fused_attention,
               "attention through the fused kernel where LibTorch has it")
      ->capture_default_str();
  app.add_flag("--compare-explicit", o.compare_explicit,
               "alternate with runs of the explicit attention products and "
               "print the ratio");
  app.add_flag("--linear-bound", o.linear_bound,
               "time the linear layers alone and print the share of their "
               "rate the forward reaches");
  app.add_option("--seconds", o.seconds_per_size, "time per batch size")
      ->capture_default_str();
  app.add_option("--intra-op-threads", o.intra_op_threads,
                 "LibTorch intra-op threads, as the server's flag")
      ->capture_default_str();
  app.add_option("--executions", o.executions,
                 "threads running the batch side by side, as the server's "
                 "--executions-per-model (they split OpenBLAS's threads); "
                 "the rate counts all of them over the wall time")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--pause-us", o.pause_us,
                 "idle microseconds before each timed forward (a server's "
                 "gap between calls); throughput counts forward time only")
      ->capture_default_str();
  app.add_option("--device", o.device, "cpu | cuda | cuda:N")
      ->capture_default_str();
  app.add_option("--quantize", o.quantize, "none | int8 (CPU, float32)")
      ->capture_default_str();
  app.add_option("--int8-float-channels", o.int8_float_channels,
                 "int8: input channels per projection kept in float32, as "
                 "the server's flag")
      ->capture_default_str();
  app.add_option("--int8-row-outliers", o.int8_row_outliers,
                 "int8: each token's largest |x| in the feed-forward's "
                 "second projection kept in float32, as the server's flag")
      ->capture_default_str();
  app.add_option("--int8-attention", o.int8_attention,
                 "int8: auto | float32 | bfloat16, as the server's flag")
      ->capture_default_str();
  app.add_option("--bf16-attention", o.bf16_attention,
                 "bfloat16 on the CPU: auto | bfloat16 | fused, as the "
                 "server's flag")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bfloat16", "fused"}));
  app.add_option("--pack-weights", o.pack_weights,
                 "auto | true | false: float32 and bfloat16 CPU weights "
                 "packed at load, as the server's flag")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "true", "false"}));
  app.add_option("--packed-max-rows", o.packed_max_rows,
                 "as the server's flag (-1: chosen for the CPU)")
      ->capture_default_str();
  app.add_option("--packed-min-elements", o.packed_min_elements,
                 "as the server's flag (-1: chosen for the dtype)")
      ->capture_default_str();
  app.add_option("--dtype", o.dtype, "float32 | float16 | bfloat16")
      ->capture_default_str();
  app.add_option("--cpu-buffer-cache-bytes", o.cpu_buffer_cache_bytes,
                 "as the server's flag (0: LibTorch's allocator alone)")
      ->capture_default_str();
  app.add_option("--hold-freed", o.hold_freed,
                 "glibc keeps freed memory mapped, as the server does with "
                 "--malloc-trim-idle above 0 (its default)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.hold_freed) encoder::runner::IdleMallocTrimmer::HoldFreed();
  if (o.executions > 1 &&
      (o.compare_grid || o.compare_explicit || o.pause_us > 0)) {
    std::cerr << "--executions above 1 takes none of --compare-grid, "
                 "--compare-explicit, --pause-us\n";
    return 2;
  }
  if (o.compare_grid && o.compare_explicit) {
    std::cerr << "--compare-grid and --compare-explicit are exclusive\n";
    return 2;
  }
  const auto parsed_dtype = encoder::model::ParseDtype(o.dtype);
  if (!parsed_dtype.ok()) {
    std::cerr << "--dtype " << parsed_dtype.status().message() << "\n";
    return 2;
  }
  const at::ScalarType dtype = *parsed_dtype;
  const at::Device device(o.device);
  std::cerr << encoder::runner::ApplyThreadPolicy(o.intra_op_threads, 0) << "\n"
            << encoder::runner::InstallCpuBufferCache(o.cpu_buffer_cache_bytes)
            << "\n";

  auto repo = o.repository.empty()
                  ? absl::StatusOr<encoder::model::Repository>(
                        encoder::model::BuiltinRepository())
                  : encoder::model::ReadRepository(o.repository);
  if (!repo.ok()) {
    std::cerr << repo.status() << "\n";
    return 1;
  }
  const encoder::model::ModelSpec* spec = nullptr;
  for (const auto& m : repo->models) {
    if (m.name == o.model) spec = &m;
  }
  if (spec == nullptr) {
    std::cerr << "no model " << o.model << "\n";
    return 1;
  }
  auto encoder = encoder::model::LoadModel(*spec, device, dtype);
  if (!encoder.ok()) {
    std::cerr << encoder.status() << "\n";
    return 1;
  }
  // As the server: int8 first (it reads the plain weights), then packing.
  if (o.quantize == "int8") {
    if (absl::Status s = (*encoder)->QuantizeInt8(o.int8_float_channels,
                                                  o.int8_row_outliers);
        !s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
    if (absl::Status s = (*encoder)->SetInt8Attention(o.int8_attention);
        !s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
  }
  if (device.is_cpu() && dtype == at::kBFloat16) {
    if (absl::Status s = (*encoder)->SetBf16Attention(o.bf16_attention);
        !s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
  }
  // As the server decides (ApplyPrecisionFlags, LoadPrecision).
  const encoder::model::PackingPlan packing = encoder::model::PlanPackingFor(
      o.pack_weights, o.packed_max_rows, o.packed_min_elements, dtype,
      encoder::model::DetectCpuFeatures());
  if (packing.pack && device.is_cpu() &&
      encoder::model::PackedLinearSupported()) {
    if (absl::Status s = (*encoder)->PrepackWeights(packing.limits); !s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
  }
  // The server's own batch path: pad, forward, slice, pool.
  encoder::runner::EncoderRunner runner(encoder->get());
  std::mt19937 rng(1);
  std::uniform_int_distribution<int64_t> id(0, spec->config.vocab_size - 1);
  nlohmann::json out;
  out["model"] = o.model;
  out["length"] = o.length;
  out["intra_op_threads"] = o.intra_op_threads;
  out["device"] = device.str();
  out["dtype"] = o.dtype;
  out["quantize"] = o.quantize;
  out["int8_float_channels"] = o.int8_float_channels;
  out["int8_row_outliers"] = o.int8_row_outliers;
  out["int8_attention"] = o.quantize != "int8"           ? "none"
                          : (*encoder)->bf16_attention() ? "bfloat16"
                                                         : "float32";
  out["bf16_attention"] = dtype != at::kBFloat16 || !device.is_cpu() ? "none"
                          : (*encoder)->bf16_attention() ? "bfloat16"
                                                         : "fused";
  const bool packed = (*encoder)->packed_weights() > 0;
  out["packed_weights"] = (*encoder)->packed_weights();
  out["packed_max_rows"] = packed ? packing.limits.max_rows : 0;
  out["packed_min_elements"] = packed ? packing.limits.min_elements : 0;
  out["pause_us"] = o.pause_us;
  out["executions"] = o.executions;
  const int64_t shortest = o.min_length > 0 ? o.min_length : o.length;
  if (shortest > o.length) {
    std::cerr << "--min-length is above --length\n";
    return 2;
  }
  std::uniform_int_distribution<int64_t> length(shortest, o.length);
  out["min_length"] = shortest;
  out["skip_padding_min_share"] = o.skip_padding_min_share;
  out["fused_attention"] = o.fused_attention;
  out["torch_version"] = TORCH_VERSION;
  // The settings of each alternating run.
  struct Mode {
    double share;
    bool fused;
  };
  std::vector<Mode> modes = {{o.skip_padding_min_share, o.fused_attention}};
  if (o.compare_grid) modes.push_back({1.0, o.fused_attention});
  if (o.compare_explicit) modes.push_back({o.skip_padding_min_share, false});
  auto apply = [&](const Mode& m) {
    runner.set_skip_padding_min_share(m.share);
    runner.set_fused_attention(m.fused);
  };
  for (int64_t b : o.batch_sizes) {
    std::vector<encoder::api::EmbedSpec> specs(b);
    std::vector<const encoder::api::EmbedSpec*> batch;
    int64_t real = 0, longest = 0;
    for (auto& s : specs) {
      s.token_ids.resize(length(rng));
      for (auto& t : s.token_ids) t = id(rng);
      real += static_cast<int64_t>(s.token_ids.size());
      longest = std::max<int64_t>(longest, s.token_ids.size());
      batch.push_back(&s);
    }
    // One result row: `times` (sorted) of passes that took `seconds` of
    // wall time in all.
    auto row_of = [&](const std::vector<double>& times, double seconds,
                      const Mode& mode) {
      nlohmann::json row;
      row["batch_size"] = b;
      row["skip_padding_min_share"] = mode.share;
      row["fused_attention"] = mode.fused;
      row["padding_share"] =
          1.0 - static_cast<double>(real) / static_cast<double>(b * longest);
      row["runs"] = times.size();
      row["sequences_per_s"] = static_cast<double>(b * times.size()) / seconds;
      row["real_tokens_per_s"] =
          static_cast<double>(real * times.size()) / seconds;
      row["p50_ms"] = times[times.size() / 2] * 1e3;
      row["min_ms"] = times.front() * 1e3;
      return row;
    };
    std::vector<encoder::api::EmbedResult> results;
    for (const Mode& mode : modes) {
      apply(mode);
      for (int i = 0; i < 2; ++i) {
        if (absl::Status st = runner.RunEmbed(batch, &results); !st.ok()) {
          std::cerr << st << "\n";
          return 1;
        }
      }
    }
    if (o.executions > 1) {
      // Every thread runs this batch back to back; the rate is all their
      // sequences over the wall time, latency over all their passes.
      std::vector<std::vector<double>> times(o.executions);
      std::atomic<bool> failed{false};
      std::vector<std::thread> threads;
      const double start = Now();
      for (int e = 0; e < o.executions; ++e) {
        threads.emplace_back([&, e] {
          std::vector<encoder::api::EmbedResult> mine;
          while (!failed &&
                 (Now() - start < o.seconds_per_size || times[e].size() < 3)) {
            const double t0 = Now();
            if (absl::Status st = runner.RunEmbed(batch, &mine); !st.ok()) {
              std::cerr << st << "\n";
              failed = true;
            }
            times[e].push_back(Now() - t0);
          }
        });
      }
      for (std::thread& t : threads) t.join();
      const double wall = Now() - start;
      if (failed) return 1;
      std::vector<double> all;
      for (const auto& t : times) all.insert(all.end(), t.begin(), t.end());
      std::sort(all.begin(), all.end());
      nlohmann::json row = row_of(all, wall, modes[0]);
      row["executions"] = o.executions;
      out["results"].push_back(row);
      continue;
    }
    std::vector<std::vector<double>> times(modes.size());
    std::vector<double> total(modes.size(), 0);
    const double start = Now();
    while (Now() - start < o.seconds_per_size || times[0].size() < 5) {
      for (size_t m = 0; m < modes.size(); ++m) {
        apply(modes[m]);
        if (o.pause_us > 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(o.pause_us));
        }
        const double t0 = Now();
        if (absl::Status st = runner.RunEmbed(batch, &results); !st.ok()) {
          std::cerr << st << "\n";
          return 1;
        }
        times[m].push_back(Now() - t0);
        total[m] += times[m].back();
      }
    }
    std::vector<double> rates;
    for (size_t m = 0; m < modes.size(); ++m) {
      std::vector<double>& t = times[m];
      std::sort(t.begin(), t.end());
      const nlohmann::json row = row_of(t, total[m], modes[m]);
      rates.push_back(row["sequences_per_s"].get<double>());
      out["results"].push_back(row);
    }
    if (o.compare_grid) {
      nlohmann::json ratio;
      ratio["batch_size"] = b;
      ratio["over_grid"] = rates[0] / rates[1];
      out["skip_padding_ratio"].push_back(ratio);
    }
    if (o.compare_explicit) {
      nlohmann::json ratio;
      ratio["batch_size"] = b;
      ratio["fused_over_explicit"] = rates[0] / rates[1];
      out["fused_attention_ratio"].push_back(ratio);
    }
    if (o.linear_bound) {
      const double bound =
          static_cast<double>(b) /
          LinearSeconds(spec->config, real, dtype, device, o.seconds_per_size);
      nlohmann::json row;
      row["batch_size"] = b;
      row["linear_bound_sequences_per_s"] = bound;
      // The products' rate at the bound, GFLOP/s.
      row["linear_bound_gflops"] =
          bound * LinearFlops(spec->config, real / b) / 1e9;
      row["share_of_linear_bound"] = rates[0] / bound;
      out["linear_bound"].push_back(row);
    }
  }
  std::cout << out.dump(2) << std::endl;
  return 0;
}

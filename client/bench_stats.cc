#include "client/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace encoder_client {
namespace {

std::string Format(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

double PerSecond(int64_t count, double elapsed_s) {
  return elapsed_s > 0 ? static_cast<double>(count) / elapsed_s : 0.0;
}

}  // namespace

void BenchStats::AddError(const std::string& code_name,
                          const std::string& message) {
  ++requests_failed;
  ++errors[code_name];
  if (first_error_code.empty()) {
    first_error_code = code_name;
    first_error_message = message;
  }
}

void BenchStats::Merge(const BenchStats& other) {
  requests_ok += other.requests_ok;
  requests_failed += other.requests_failed;
  sequences_ok += other.sequences_ok;
  tokens_ok += other.tokens_ok;
  latencies_ms.insert(latencies_ms.end(), other.latencies_ms.begin(),
                      other.latencies_ms.end());
  for (const auto& [code, count] : other.errors) errors[code] += count;
  for (const auto& [size, count] : other.batch_sizes) {
    batch_sizes[size] += count;
  }
  if (first_error_code.empty()) {
    first_error_code = other.first_error_code;
    first_error_message = other.first_error_message;
  }
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  const auto rank = static_cast<size_t>(
      std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

nlohmann::ordered_json BenchReportJson(const BenchSetup& setup,
                                       BenchStats stats, double elapsed_s) {
  std::sort(stats.latencies_ms.begin(), stats.latencies_ms.end());
  const std::vector<double>& latencies = stats.latencies_ms;
  const double mean_latency =
      latencies.empty()
          ? 0.0
          : std::accumulate(latencies.begin(), latencies.end(), 0.0) /
                static_cast<double>(latencies.size());

  nlohmann::ordered_json histogram = nlohmann::ordered_json::object();
  int64_t sequences = 0;
  double weighted = 0.0;
  for (const auto& [size, count] : stats.batch_sizes) {
    histogram[std::to_string(size)] = count;
    sequences += count;
    weighted += static_cast<double>(size) * static_cast<double>(count);
  }

  return {
      {"model", setup.model},
      {"mode", setup.stream ? "stream" : "unary"},
      {"concurrency", setup.concurrency},
      {"inputs_per_request", setup.inputs_per_request},
      {"length", {{"min", setup.min_length}, {"max", setup.max_length}}},
      {"elapsed_s", elapsed_s},
      {"requests", stats.requests_ok + stats.requests_failed},
      {"failed_requests", stats.requests_failed},
      {"throughput",
       {{"requests_per_s", PerSecond(stats.requests_ok, elapsed_s)},
        {"sequences_per_s", PerSecond(stats.sequences_ok, elapsed_s)},
        {"tokens_per_s", PerSecond(stats.tokens_ok, elapsed_s)}}},
      {"latency_ms",
       {{"p50", Percentile(latencies, 50)},
        {"p90", Percentile(latencies, 90)},
        {"p99", Percentile(latencies, 99)},
        {"max", latencies.empty() ? 0.0 : latencies.back()},
        {"mean", mean_latency}}},
      {"errors", stats.errors},
      {"batch_size",
       {{"histogram", histogram},
        {"mean",
         sequences > 0 ? weighted / static_cast<double>(sequences) : 0.0}}},
  };
}

void PrintBenchTable(const nlohmann::ordered_json& report, std::ostream& out) {
  const auto& throughput = report["throughput"];
  const auto& latency = report["latency_ms"];
  const auto& batch = report["batch_size"];
  out << "model         " << report["model"].get<std::string>() << " ("
      << report["mode"].get<std::string>() << ", concurrency "
      << report["concurrency"] << ", " << report["inputs_per_request"]
      << " inputs/request, length " << report["length"]["min"] << ".."
      << report["length"]["max"] << ")\n";
  out << "requests      " << report["requests"] << " in "
      << Format("%.2f", report["elapsed_s"].get<double>()) << " s, "
      << report["failed_requests"] << " failed\n";
  out << "throughput    "
      << Format("%.1f", throughput["requests_per_s"].get<double>())
      << " req/s  "
      << Format("%.1f", throughput["sequences_per_s"].get<double>())
      << " seq/s  " << Format("%.0f", throughput["tokens_per_s"].get<double>())
      << " tok/s\n";
  out << "latency ms    p50 " << Format("%.2f", latency["p50"].get<double>())
      << "  p90 " << Format("%.2f", latency["p90"].get<double>()) << "  p99 "
      << Format("%.2f", latency["p99"].get<double>()) << "  max "
      << Format("%.2f", latency["max"].get<double>()) << "\n";
  out << "batch size    mean " << Format("%.2f", batch["mean"].get<double>());
  std::map<int, int64_t> by_size;  // numeric order, whatever the JSON's
  for (const auto& [size, count] : batch["histogram"].items()) {
    by_size[std::stoi(size)] = count.get<int64_t>();
  }
  if (!by_size.empty()) out << "  (size:sequences)";
  for (const auto& [size, count] : by_size) out << " " << size << ":" << count;
  out << "\n";
  out << "errors        ";
  if (report["errors"].empty()) out << "none";
  const char* separator = "";
  for (const auto& [code, count] : report["errors"].items()) {
    out << separator << code << ":" << count;
    separator = "  ";
  }
  out << std::endl;
}

}  // namespace encoder_client

// What a load run measured, and its two reports (a human table and JSON).
#ifndef ENCODER_CLIENT_BENCH_STATS_H_
#define ENCODER_CLIENT_BENCH_STATS_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace encoder_client {

// Counters of one caller; merged into one total after the run. Not
// thread-safe: each caller owns its own.
struct BenchStats {
  int64_t requests_ok = 0;
  int64_t requests_failed = 0;
  int64_t sequences_ok = 0;
  int64_t tokens_ok = 0;                   // input tokens sent
  std::vector<double> latencies_ms;        // successful requests
  std::map<std::string, int64_t> errors;   // gRPC code name -> requests
  std::map<int32_t, int64_t> batch_sizes;  // server batch size -> sequences
  std::string first_error_code;            // empty until a failure
  std::string first_error_message;

  // Counts one failed request.
  void AddError(const std::string& code_name, const std::string& message);

  // Adds `other`'s counts and samples to these.
  void Merge(const BenchStats& other);
};

// Describes the run for the reports.
struct BenchSetup {
  std::string model;
  bool stream = false;
  int concurrency = 1;
  int inputs_per_request = 1;
  int min_length = 0;
  int max_length = 0;
};

// Nearest-rank percentile (0 < p <= 100) of `sorted` (ascending); 0 when
// empty.
double Percentile(const std::vector<double>& sorted, double p);

// {"model", "mode", "concurrency", "inputs_per_request", "length",
//  "elapsed_s", "requests", "failed_requests",
//  "throughput": {"requests_per_s", "sequences_per_s", "tokens_per_s"},
//  "latency_ms": {"p50", "p90", "p99", "max", "mean"},
//  "errors": {CODE_NAME: count},
//  "batch_size": {"histogram": {"size": sequences}, "mean"}}.
// Throughput counts successful requests over `elapsed_s`. The batch-size
// mean weighs each returned sequence once.
nlohmann::ordered_json BenchReportJson(const BenchSetup& setup,
                                       BenchStats stats, double elapsed_s);

// The same numbers as an aligned plain-text table.
void PrintBenchTable(const nlohmann::ordered_json& report, std::ostream& out);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_BENCH_STATS_H_

// encoder-bench-echo: gRPC's callback API serving one unary method that
// returns its request, and a load client shaped like `encoder-client
// bench` (one thread per caller, blocking unary calls on one channel).
// Built from the same gRPC as encoder-server, it is the ceiling of the
// transport on this host: requests/s and CPU per request that no service
// on this gRPC can beat.
//
//   encoder-bench-echo serve [--listen 127.0.0.1:0] [--ready-file FILE]
//   encoder-bench-echo bench --target HOST:PORT [--concurrency 32]
//       [--duration-s 5] [--payload-bytes 64] [--warmup-requests 64]
//
// serve writes {"grpc_port": N} to FILE once listening and stops on
// SIGTERM or SIGINT. bench prints a JSON report with encoder-client
// bench's field names (requests, failed_requests, throughput.requests_per_s,
// latency_ms.p50/p90/p99/max).
#include <grpcpp/grpcpp.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "echo/echo.grpc.pb.h"
#include "nlohmann/json.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using encoder::bench::Echo;
using encoder::bench::EchoMessage;

class EchoService final : public Echo::CallbackService {
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const EchoMessage* request,
                                 EchoMessage* reply) override {
    *reply = *request;
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// Writes `text` to `path` through a temporary file and a rename, so that
// a reader never sees it half written.
bool WriteAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << text << "\n";
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

int Serve(const std::string& listen, const std::string& ready_file) {
  // SIGTERM and SIGINT are taken by sigwait below, in every thread.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  EchoService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << "encoder-bench-echo: cannot listen on " << listen << "\n";
    return 1;
  }
  std::cerr << "encoder-bench-echo: serving on port " << port << std::endl;
  if (!ready_file.empty() &&
      !WriteAtomically(ready_file,
                       nlohmann::json{{"grpc_port", port}}.dump())) {
    std::cerr << "encoder-bench-echo: cannot write " << ready_file << "\n";
    return 1;
  }
  int signal = 0;
  sigwait(&stop, &signal);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

struct CallerStats {
  std::vector<double> latencies_ms;
  int64_t failed = 0;
  std::string first_error;
};

// Calls Echo back to back until `stop_at`.
void RunCaller(Echo::Stub* stub, const EchoMessage& request,
               Clock::time_point stop_at, CallerStats* stats) {
  EchoMessage reply;
  while (Clock::now() < stop_at) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    const auto start = Clock::now();
    const grpc::Status status = stub->Echo(&context, request, &reply);
    const auto end = Clock::now();
    if (!status.ok() || reply.payload().size() != request.payload().size()) {
      if (stats->failed++ == 0) {
        stats->first_error =
            status.ok() ? "reply of the wrong size" : status.error_message();
      }
      continue;
    }
    stats->latencies_ms.push_back(
        std::chrono::duration<double, std::milli>(end - start).count());
  }
}

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const size_t i = std::min(sorted.size() - 1,
                            static_cast<size_t>(q * (sorted.size() - 1) + 0.5));
  return sorted[i];
}

// Calls Echo `count` times one after another; false (and a message) on
// the first failure.
bool Warm(Echo::Stub* stub, const std::string& target,
          const EchoMessage& request, int count) {
  for (int i = 0; i < count; ++i) {
    EchoMessage reply;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    const grpc::Status status = stub->Echo(&context, request, &reply);
    if (!status.ok()) {
      std::cerr << "encoder-bench-echo: " << target << ": "
                << status.error_message() << "\n";
      return false;
    }
  }
  return true;
}

// The callers' results as one report, with encoder-client bench's names.
nlohmann::ordered_json Report(const std::vector<CallerStats>& stats,
                              int concurrency, int payload_bytes,
                              double elapsed_s) {
  std::vector<double> all;
  int64_t failed = 0;
  std::string first_error;
  for (const CallerStats& s : stats) {
    all.insert(all.end(), s.latencies_ms.begin(), s.latencies_ms.end());
    failed += s.failed;
    if (first_error.empty()) first_error = s.first_error;
  }
  std::sort(all.begin(), all.end());
  nlohmann::ordered_json report = {
      {"mode", "echo"},
      {"concurrency", concurrency},
      {"payload_bytes", payload_bytes},
      {"duration_s", elapsed_s},
      {"requests", static_cast<int64_t>(all.size())},
      {"failed_requests", failed},
      {"throughput", {{"requests_per_s", all.size() / elapsed_s}}},
      {"latency_ms",
       {{"p50", Percentile(all, 0.50)},
        {"p90", Percentile(all, 0.90)},
        {"p99", Percentile(all, 0.99)},
        {"max", all.empty() ? 0.0 : all.back()}}}};
  if (failed > 0) report["first_error"] = first_error;
  return report;
}

int Bench(const std::string& target, int concurrency, double duration_s,
          int payload_bytes, int warmup_requests) {
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  std::unique_ptr<Echo::Stub> stub = Echo::NewStub(channel);
  EchoMessage request;
  request.set_payload(std::string(payload_bytes, 'x'));
  if (!Warm(stub.get(), target, request, warmup_requests)) return 1;
  std::vector<CallerStats> stats(concurrency);
  std::vector<std::thread> callers;
  const auto start = Clock::now();
  const auto stop_at = start + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(duration_s));
  for (int i = 0; i < concurrency; ++i) {
    callers.emplace_back(RunCaller, stub.get(), std::cref(request), stop_at,
                         &stats[i]);
  }
  for (std::thread& caller : callers) caller.join();
  const double elapsed_s =
      std::chrono::duration<double>(Clock::now() - start).count();
  const nlohmann::ordered_json report =
      Report(stats, concurrency, payload_bytes, elapsed_s);
  std::cout << report.dump(2) << std::endl;
  return report["failed_requests"].get<int64_t>() > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gRPC's ceiling on this host: an echo server and its load"};
  app.require_subcommand(1);
  std::string listen = "127.0.0.1:0";
  std::string ready_file;
  CLI::App* serve = app.add_subcommand("serve", "serve Echo until SIGTERM");
  serve->add_option("--listen", listen, "address to listen on")
      ->capture_default_str();
  serve->add_option("--ready-file", ready_file,
                    "write {\"grpc_port\": N} here once listening");
  std::string target;
  int concurrency = 32;
  double duration_s = 5;
  int payload_bytes = 64;
  int warmup_requests = 64;
  CLI::App* bench = app.add_subcommand("bench", "call Echo back to back");
  bench->add_option("--target", target, "HOST:PORT")->required();
  bench->add_option("--concurrency", concurrency, "callers, one thread each")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  bench->add_option("--duration-s", duration_s, "seconds of load")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  bench
      ->add_option("--payload-bytes", payload_bytes,
                   "bytes in each request and reply")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  bench
      ->add_option("--warmup-requests", warmup_requests,
                   "calls before the clock starts")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (serve->parsed()) return Serve(listen, ready_file);
  return Bench(target, concurrency, duration_s, payload_bytes, warmup_requests);
}

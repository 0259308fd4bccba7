// PrometheusMetrics served on a loopback port (the HTTP layer's /metrics,
// http::MetricsHttpServer, rendering it) and read back the way Prometheus
// reads it: an HTTP GET of /metrics, parsed as exposition text. Every test
// starts its own server on 127.0.0.1:0.
#include "server/metrics/prometheus_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/http/metrics_http_server.h"

namespace encoder::metrics {
namespace {

using Labels = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  Labels labels;
  double value = 0;
};

struct Scrape {
  int status = 0;
  std::string body;
  std::vector<Sample> samples;

  // The value of the one sample with exactly this name and label set.
  std::optional<double> Get(const std::string& name,
                            const Labels& labels = {}) const {
    for (const Sample& s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return std::nullopt;
  }

  // Label sets of every sample named `name`.
  std::vector<Labels> LabelSets(const std::string& name) const {
    std::vector<Labels> sets;
    for (const Sample& s : samples) {
      if (s.name == name) sets.push_back(s.labels);
    }
    return sets;
  }
};

// Parses one `name{k="v",...} value` line; label values here never hold
// quotes or commas.
Sample ParseSampleLine(const std::string& line) {
  Sample sample;
  const size_t brace = line.find('{');
  const size_t space = line.rfind(' ');
  if (brace != std::string::npos && brace < space) {
    sample.name = line.substr(0, brace);
    const size_t close = line.find('}', brace);
    std::string body = line.substr(brace + 1, close - brace - 1);
    std::stringstream pairs(body);
    std::string pair;
    while (std::getline(pairs, pair, ',')) {
      const size_t eq = pair.find('=');
      sample.labels[pair.substr(0, eq)] =
          pair.substr(eq + 2, pair.size() - eq - 3);
    }
  } else {
    sample.name = line.substr(0, space);
  }
  sample.value = std::strtod(line.c_str() + space + 1, nullptr);
  return sample;
}

// Sends `request` over a plain TCP socket and parses the response.
Scrape Send(int port, const std::string& request) {
  Scrape scrape;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ADD_FAILURE() << "connect to port " << port << " failed";
    close(fd);
    return scrape;
  }
  EXPECT_EQ(send(fd, request.data(), request.size(), 0),
            static_cast<ssize_t>(request.size()));
  // Reads until the connection closes or the body announced by
  // Content-Length is complete (the server keeps HTTP/1.1 connections
  // open).
  std::string response;
  char buffer[4096];
  ssize_t n;
  const bool head = request.rfind("HEAD ", 0) == 0;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) {
    response.append(buffer, static_cast<size_t>(n));
    const size_t end = response.find("\r\n\r\n");
    if (end == std::string::npos) continue;
    const size_t length = response.find("Content-Length: ");
    if (length == std::string::npos || length > end) continue;
    const size_t body = head ? 0 : std::stoul(response.substr(length + 16));
    if (response.size() >= end + 4 + body) break;
  }
  close(fd);

  const size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    ADD_FAILURE() << "no HTTP header in: " << response;
    return scrape;
  }
  std::istringstream status_line(response.substr(0, header_end));
  std::string version;
  status_line >> version >> scrape.status;
  scrape.body = response.substr(header_end + 4);
  std::istringstream lines(scrape.body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    scrape.samples.push_back(ParseSampleLine(line));
  }
  return scrape;
}

// GET /metrics, as Prometheus sends it but without gzip (so that the body
// can be parsed here; metrics_http_server_test covers gzip).
Scrape Fetch(int port) {
  return Send(port,
              "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              "Accept: text/plain\r\n\r\n");
}

ModelLabels RopeModel() {
  ModelLabels labels;
  labels.model = "m1";
  labels.scheme = "rope";
  labels.device = "cpu";
  labels.dtype = "float32";
  labels.d_model = 512;
  labels.num_heads = 8;
  labels.num_layers = 4;
  return labels;
}

class PrometheusMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_ = PrometheusMetrics::Create();
    http::MetricsHttpOptions options;
    options.listen = "127.0.0.1:0";
    auto started = http::MetricsHttpServer::Start(
        options, [metrics = metrics_.get()] { return metrics->Render(); });
    ASSERT_TRUE(started.ok()) << started.status();
    http_ = std::move(*started);
    ASSERT_GT(port(), 0);
  }

  int port() const { return http_->port(); }

  std::unique_ptr<PrometheusMetrics> metrics_;
  // Declared last: stops serving before the metrics go.
  std::unique_ptr<http::MetricsHttpServer> http_;
};

TEST_F(PrometheusMetricsTest, ServesExpositionText) {
  metrics_->RegisterModel(RopeModel());
  metrics_->RequestDone("Embed", "m1", "OK", 0.001);
  const Scrape scrape = Fetch(port());
  EXPECT_EQ(scrape.status, 200);
  for (const char* type :
       {"encoder_requests_total counter",
        "encoder_request_duration_seconds histogram",
        "encoder_batch_size histogram",
        "encoder_dropped_sequences_total counter", "encoder_queue_depth gauge",
        "encoder_running_batches gauge", "encoder_model_info gauge",
        "process_resident_memory_bytes gauge"}) {
    EXPECT_THAT(scrape.body,
                ::testing::HasSubstr(std::string("# TYPE ") + type));
  }
}

TEST_F(PrometheusMetricsTest, CountsRequestsByRpcModelAndCode) {
  metrics_->RegisterModel(RopeModel());
  for (int i = 0; i < 3; ++i) metrics_->RequestDone("Embed", "m1", "OK", 0.002);
  metrics_->RequestDone("Embed", "m1", "INVALID_ARGUMENT", 0.0001);
  metrics_->RequestDone("ListModels", "", "OK", 0.0003);
  metrics_->RequestDone("Embed", "", "NOT_FOUND", 0.0004);

  const Scrape s = Fetch(port());
  const Labels ok = {
      {"rpc", "Embed"}, {"model", "m1"}, {"scheme", "rope"}, {"code", "OK"}};
  EXPECT_EQ(s.Get("encoder_requests_total", ok), 3);
  EXPECT_EQ(s.Get("encoder_requests_total", {{"rpc", "Embed"},
                                             {"model", "m1"},
                                             {"scheme", "rope"},
                                             {"code", "INVALID_ARGUMENT"}}),
            1);
  EXPECT_EQ(s.Get("encoder_requests_total", {{"rpc", "Embed"},
                                             {"model", ""},
                                             {"scheme", ""},
                                             {"code", "NOT_FOUND"}}),
            1);
  EXPECT_EQ(s.LabelSets("encoder_requests_total").size(), 4u);

  const Labels embed = {{"rpc", "Embed"}, {"model", "m1"}, {"scheme", "rope"}};
  EXPECT_EQ(s.Get("encoder_request_duration_seconds_count", embed), 4);
  EXPECT_DOUBLE_EQ(*s.Get("encoder_request_duration_seconds_sum", embed),
                   3 * 0.002 + 0.0001);
  Labels bucket = embed;
  bucket["le"] = "0.0001";
  EXPECT_EQ(s.Get("encoder_request_duration_seconds_bucket", bucket), 1);
  bucket["le"] = "0.001";
  EXPECT_EQ(s.Get("encoder_request_duration_seconds_bucket", bucket), 1);
  bucket["le"] = "0.0025";
  EXPECT_EQ(s.Get("encoder_request_duration_seconds_bucket", bucket), 4);
  bucket["le"] = "+Inf";
  EXPECT_EQ(s.Get("encoder_request_duration_seconds_bucket", bucket), 4);
  bucket["le"] = "60";
  EXPECT_EQ(s.Get("encoder_request_duration_seconds_bucket", bucket), 4);
}

TEST_F(PrometheusMetricsTest, RecordsBatchesAndSequenceTimes) {
  metrics_->RegisterModel(RopeModel());
  const Labels m1 = {{"model", "m1"}, {"scheme", "rope"}};
  {
    // Registration alone creates every per-model series at zero.
    const Scrape s = Fetch(port());
    EXPECT_EQ(s.Get("encoder_batch_size_count", m1), 0);
    EXPECT_EQ(s.Get("encoder_tokens_total", m1), 0);
    EXPECT_EQ(s.Get("encoder_queue_depth", m1), 0);
    EXPECT_EQ(s.Get("encoder_running_batches", m1), 0);
    EXPECT_EQ(s.Get("encoder_queue_duration_seconds_count", m1), 0);
  }
  metrics_->Batch("m1", 4, 40, 30);
  metrics_->Batch("m1", 2, 16, 16);
  metrics_->SequenceTimes("m1", 0.0002, 0.5);
  metrics_->SequenceTimes("m1", 0.004, 3.0);
  metrics_->QueueDepth("m1", 7);
  metrics_->QueueDepth("m1", 5);
  metrics_->RunningBatches("m1", 2);

  const Scrape s = Fetch(port());
  EXPECT_EQ(s.Get("encoder_batch_size_count", m1), 2);
  EXPECT_EQ(s.Get("encoder_batch_size_sum", m1), 6);
  EXPECT_EQ(s.Get("encoder_batch_tokens_sum", m1), 56);
  EXPECT_EQ(s.Get("encoder_tokens_total", m1), 46);
  EXPECT_EQ(s.Get("encoder_batch_padding_ratio_count", m1), 2);
  EXPECT_DOUBLE_EQ(*s.Get("encoder_batch_padding_ratio_sum", m1), 0.25);
  Labels bucket = m1;
  bucket["le"] = "0";
  EXPECT_EQ(s.Get("encoder_batch_padding_ratio_bucket", bucket), 1);
  bucket["le"] = "0.2";
  EXPECT_EQ(s.Get("encoder_batch_padding_ratio_bucket", bucket), 1);
  bucket["le"] = "0.3";
  EXPECT_EQ(s.Get("encoder_batch_padding_ratio_bucket", bucket), 2);

  EXPECT_EQ(s.Get("encoder_queue_duration_seconds_count", m1), 2);
  EXPECT_DOUBLE_EQ(*s.Get("encoder_queue_duration_seconds_sum", m1), 0.0042);
  EXPECT_EQ(s.Get("encoder_inference_duration_seconds_count", m1), 2);
  EXPECT_DOUBLE_EQ(*s.Get("encoder_inference_duration_seconds_sum", m1), 3.5);
  bucket = m1;
  bucket["le"] = "0.00025";
  EXPECT_EQ(s.Get("encoder_queue_duration_seconds_bucket", bucket), 1);
  bucket["le"] = "2.5";
  EXPECT_EQ(s.Get("encoder_inference_duration_seconds_bucket", bucket), 1);
  bucket["le"] = "5";
  EXPECT_EQ(s.Get("encoder_inference_duration_seconds_bucket", bucket), 2);
  EXPECT_EQ(s.Get("encoder_queue_depth", m1), 5);
  EXPECT_EQ(s.Get("encoder_running_batches", m1), 2);
}

TEST_F(PrometheusMetricsTest, CountsDroppedSequencesByReason) {
  metrics_->RegisterModel(RopeModel());
  metrics_->Dropped("m1", "deadline", 2);
  metrics_->Dropped("m1", "deadline", 1);
  metrics_->Dropped("m1", "overload", 5);

  const Scrape s = Fetch(port());
  auto dropped = [&](const std::string& reason) {
    return s.Get("encoder_dropped_sequences_total",
                 {{"model", "m1"}, {"scheme", "rope"}, {"reason", reason}});
  };
  EXPECT_EQ(dropped("deadline"), 3);
  EXPECT_EQ(dropped("overload"), 5);
  EXPECT_EQ(dropped("cancelled"), 0);
  EXPECT_EQ(dropped("shutdown"), 0);
  EXPECT_EQ(s.LabelSets("encoder_dropped_sequences_total").size(), 4u);
}

TEST_F(PrometheusMetricsTest, ReportsBeforeRegistrationMoveToTheScheme) {
  // A batcher may report while later models still load, before main
  // registers the model.
  metrics_->QueueDepth("m1", 3);
  metrics_->Batch("m1", 2, 20, 15);
  metrics_->SequenceTimes("m1", 0.001, 0.02);
  metrics_->Dropped("m1", "cancelled", 4);
  metrics_->RequestDone("Embed", "m1", "OK", 0.03);
  metrics_->RegisterModel(RopeModel());
  metrics_->RequestDone("Embed", "m1", "OK", 0.01);
  metrics_->Batch("m1", 1, 10, 10);

  const Scrape s = Fetch(port());
  const Labels m1 = {{"model", "m1"}, {"scheme", "rope"}};
  EXPECT_EQ(s.Get("encoder_queue_depth", m1), 3);
  EXPECT_EQ(s.Get("encoder_tokens_total", m1), 25);
  EXPECT_EQ(s.Get("encoder_batch_size_count", m1), 2);
  EXPECT_EQ(s.Get("encoder_batch_size_sum", m1), 3);
  Labels bucket = m1;
  bucket["le"] = "1";
  EXPECT_EQ(s.Get("encoder_batch_size_bucket", bucket), 1);
  bucket["le"] = "2";
  EXPECT_EQ(s.Get("encoder_batch_size_bucket", bucket), 2);
  EXPECT_EQ(s.Get("encoder_queue_duration_seconds_count", m1), 1);
  EXPECT_DOUBLE_EQ(*s.Get("encoder_inference_duration_seconds_sum", m1), 0.02);
  EXPECT_EQ(
      s.Get("encoder_dropped_sequences_total",
            {{"model", "m1"}, {"scheme", "rope"}, {"reason", "cancelled"}}),
      4);
  const Labels embed = {{"rpc", "Embed"}, {"model", "m1"}, {"scheme", "rope"}};
  Labels ok = embed;
  ok["code"] = "OK";
  EXPECT_EQ(s.Get("encoder_requests_total", ok), 2);
  EXPECT_EQ(s.Get("encoder_request_duration_seconds_count", embed), 2);
  EXPECT_DOUBLE_EQ(*s.Get("encoder_request_duration_seconds_sum", embed), 0.04);
  for (const Sample& sample : s.samples) {
    if (sample.labels.count("scheme") != 0) {
      EXPECT_EQ(sample.labels.at("scheme"), "rope") << sample.name;
    }
  }
}

TEST_F(PrometheusMetricsTest, InputTokensHistogramPerModel) {
  // One input reported before registration moves with the series.
  metrics_->InputTokens("m1", 3);
  metrics_->RegisterModel(RopeModel());
  ModelLabels other = RopeModel();
  other.model = "m2";
  metrics_->RegisterModel(other);
  for (int64_t tokens : {1, 512, 513, 8192, 9000}) {
    metrics_->InputTokens("m1", tokens);
  }
  const Scrape s = Fetch(port());
  const Labels m1 = {{"model", "m1"}, {"scheme", "rope"}};
  const Labels m2 = {{"model", "m2"}, {"scheme", "rope"}};
  EXPECT_EQ(s.Get("encoder_input_tokens_count", m1), 6);
  EXPECT_EQ(s.Get("encoder_input_tokens_sum", m1),
            3 + 1 + 512 + 513 + 8192 + 9000);
  EXPECT_EQ(s.Get("encoder_input_tokens_count", m2), 0);
  // Buckets 1, 2, 4, ..., 8192 and +Inf, cumulative.
  const std::map<std::string, double> expected = {
      {"1", 1},   {"2", 1},    {"4", 2},    {"8", 2},    {"256", 2},
      {"512", 3}, {"1024", 4}, {"4096", 4}, {"8192", 5}, {"+Inf", 6}};
  for (const auto& [le, count] : expected) {
    Labels bucket = m1;
    bucket["le"] = le;
    EXPECT_EQ(s.Get("encoder_input_tokens_bucket", bucket), count) << le;
  }
  size_t buckets = 0;
  for (const Labels& labels : s.LabelSets("encoder_input_tokens_bucket")) {
    if (labels.at("model") == "m1") ++buckets;
  }
  EXPECT_EQ(buckets, 15u);  // 2^0 .. 2^13 and +Inf
}

TEST_F(PrometheusMetricsTest, ExportsBuildInfo) {
  metrics_->BuildInfo("1.2.3", "abc1234", "1.13.0", "gcc 12.2.0");
  const Scrape s = Fetch(port());
  EXPECT_EQ(s.Get("encoder_build_info", {{"version", "1.2.3"},
                                         {"commit", "abc1234"},
                                         {"libtorch", "1.13.0"},
                                         {"compiler", "gcc 12.2.0"}}),
            1);
  EXPECT_EQ(s.LabelSets("encoder_build_info").size(), 1u);
}

TEST_F(PrometheusMetricsTest, TracksInFlightRequestsPerRpc) {
  metrics_->InFlight("Embed", 1);
  metrics_->InFlight("Embed", 1);
  metrics_->InFlight("EmbedStream", 1);
  metrics_->InFlight("Embed", -1);

  const Scrape s = Fetch(port());
  EXPECT_EQ(s.Get("encoder_in_flight_requests", {{"rpc", "Embed"}}), 1);
  EXPECT_EQ(s.Get("encoder_in_flight_requests", {{"rpc", "EmbedStream"}}), 1);
}

TEST_F(PrometheusMetricsTest, ExportsModelInfoOncePerModel) {
  metrics_->RegisterModel(RopeModel());
  ModelLabels relative = RopeModel();
  relative.model = "m2";
  relative.scheme = "relative";
  relative.num_layers = 2;
  metrics_->RegisterModel(relative);
  relative.dtype = "bfloat16";
  metrics_->RegisterModel(relative);

  const Scrape s = Fetch(port());
  EXPECT_EQ(s.Get("encoder_model_info", {{"model", "m1"},
                                         {"scheme", "rope"},
                                         {"device", "cpu"},
                                         {"dtype", "float32"},
                                         {"d_model", "512"},
                                         {"num_heads", "8"},
                                         {"num_layers", "4"}}),
            1);
  EXPECT_EQ(s.Get("encoder_model_info", {{"model", "m2"},
                                         {"scheme", "relative"},
                                         {"device", "cpu"},
                                         {"dtype", "bfloat16"},
                                         {"d_model", "512"},
                                         {"num_heads", "8"},
                                         {"num_layers", "2"}}),
            1);
  EXPECT_EQ(s.LabelSets("encoder_model_info").size(), 2u);
}

TEST_F(PrometheusMetricsTest, ReportsResidentMemory) {
  const Scrape s = Fetch(port());
  const std::optional<double> rss = s.Get("process_resident_memory_bytes");
  ASSERT_TRUE(rss.has_value());
  EXPECT_GT(*rss, 1024 * 1024);
}

TEST_F(PrometheusMetricsTest, GpuMemoryOnlyForCudaDevicesWithAReader) {
  metrics_->RegisterModel(RopeModel());
  EXPECT_TRUE(Fetch(port()).LabelSets("encoder_gpu_memory_bytes").empty());

  metrics_->SetGpuMemoryReader(
      [](const std::string& device) -> absl::StatusOr<GpuMemory> {
        if (device != "cuda:0") return absl::NotFoundError(device);
        return GpuMemory{1000, 4096};
      });
  EXPECT_TRUE(Fetch(port()).LabelSets("encoder_gpu_memory_bytes").empty());

  ModelLabels gpu = RopeModel();
  gpu.model = "g0";
  gpu.device = "cuda:0";
  metrics_->RegisterModel(gpu);
  gpu.model = "g1";
  gpu.device = "cuda:1";
  metrics_->RegisterModel(gpu);

  const Scrape s = Fetch(port());
  EXPECT_EQ(s.Get("encoder_gpu_memory_bytes",
                  {{"device", "cuda:0"}, {"kind", "allocated"}}),
            1000);
  EXPECT_EQ(s.Get("encoder_gpu_memory_bytes",
                  {{"device", "cuda:0"}, {"kind", "reserved"}}),
            4096);
  EXPECT_EQ(s.LabelSets("encoder_gpu_memory_bytes").size(), 2u);
}

TEST_F(PrometheusMetricsTest, CpuBufferCacheSeriesOnceAReaderIsSet) {
  EXPECT_FALSE(Fetch(port()).Get("encoder_cpu_buffer_cache_bytes"));
  auto sample =
      std::make_shared<CpuCacheSample>(CpuCacheSample{3 << 20, 17, 5, 2});
  metrics_->SetCpuCacheReader([sample] { return *sample; });
  Scrape s = Fetch(port());
  EXPECT_EQ(s.Get("encoder_cpu_buffer_cache_bytes"), 3 << 20);
  EXPECT_EQ(
      s.Get("encoder_cpu_buffer_cache_requests_total", {{"result", "hit"}}),
      17);
  EXPECT_EQ(
      s.Get("encoder_cpu_buffer_cache_requests_total", {{"result", "miss"}}),
      5);
  EXPECT_EQ(s.Get("encoder_cpu_buffer_cache_dropped_total"), 2);
  // Read at every scrape, not once.
  sample->cached_bytes = 0;
  sample->hits = 18;
  s = Fetch(port());
  EXPECT_EQ(s.Get("encoder_cpu_buffer_cache_bytes"), 0);
  EXPECT_EQ(
      s.Get("encoder_cpu_buffer_cache_requests_total", {{"result", "hit"}}),
      18);
}

TEST_F(PrometheusMetricsTest, ConnectionSeriesOnceAReaderIsSet) {
  EXPECT_FALSE(Fetch(port()).Get("encoder_connections_shed_total"));
  auto sample = std::make_shared<ConnectionSample>();
  sample->shed_for_descriptors = 4;
  sample->accept_exhausted = 6;
  sample->listeners = {{"grpc", true}, {"http", false}};
  metrics_->SetConnectionReader([sample] { return *sample; });
  Scrape s = Fetch(port());
  EXPECT_EQ(s.Get("encoder_connections_shed_total"), 4);
  EXPECT_EQ(s.Get("encoder_accept_exhausted_total"), 6);
  EXPECT_EQ(s.Get("encoder_listener_up", {{"listener", "grpc"}}), 1);
  EXPECT_EQ(s.Get("encoder_listener_up", {{"listener", "http"}}), 0);
  // No HTTP port reported: no HTTP series.
  EXPECT_FALSE(s.Get("encoder_http_open_connections"));
  sample->http = true;
  sample->http_open = 3;
  sample->http_accepted = 10;
  sample->http_client_closed = 2;
  sample->http_timed_out = 1;
  sample->http_rejected = 5;
  s = Fetch(port());
  EXPECT_EQ(s.Get("encoder_http_open_connections"), 3);
  EXPECT_EQ(s.Get("encoder_http_connections_total"), 10);
  EXPECT_EQ(s.Get("encoder_http_abandoned_requests_total",
                  {{"reason", "client_closed"}}),
            2);
  EXPECT_EQ(
      s.Get("encoder_http_abandoned_requests_total", {{"reason", "timeout"}}),
      1);
  EXPECT_EQ(s.Get("encoder_http_rejected_requests_total"), 5);
}

TEST_F(PrometheusMetricsTest, ConcurrentUpdatesAreAllCounted) {
  metrics_->RegisterModel(RopeModel());
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      const std::string code = t % 2 == 0 ? "OK" : "CANCELLED";
      for (int i = 0; i < kPerThread; ++i) {
        metrics_->InFlight("Embed", 1);
        metrics_->RequestDone("Embed", "m1", code, 0.001);
        metrics_->Batch("m1", 1, 10, 10);
        metrics_->InFlight("Embed", -1);
      }
    });
  }
  for (std::thread& t : threads) t.join();

  const Scrape s = Fetch(port());
  const Labels embed = {{"rpc", "Embed"}, {"model", "m1"}, {"scheme", "rope"}};
  Labels ok = embed;
  ok["code"] = "OK";
  Labels cancelled = embed;
  cancelled["code"] = "CANCELLED";
  EXPECT_EQ(s.Get("encoder_requests_total", ok), kThreads / 2 * kPerThread);
  EXPECT_EQ(s.Get("encoder_requests_total", cancelled),
            kThreads / 2 * kPerThread);
  EXPECT_EQ(s.Get("encoder_request_duration_seconds_count", embed),
            kThreads * kPerThread);
  EXPECT_EQ(
      s.Get("encoder_tokens_total", {{"model", "m1"}, {"scheme", "rope"}}),
      10.0 * kThreads * kPerThread);
  EXPECT_EQ(s.Get("encoder_in_flight_requests", {{"rpc", "Embed"}}), 0);
}

TEST_F(PrometheusMetricsTest, AnswersOnlyGetAndHeadOfMetrics) {
  metrics_->RegisterModel(RopeModel());
  EXPECT_EQ(Send(port(), "GET / HTTP/1.1\r\n\r\n").status, 404);
  EXPECT_EQ(Send(port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
                .status,
            405);
  EXPECT_EQ(Send(port(), "garbage\r\n\r\n").status, 400);
  const Scrape head = Send(port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  const Scrape query = Send(port(), "GET /metrics?x=1 HTTP/1.0\r\n\r\n");
  EXPECT_EQ(query.status, 200);
  EXPECT_EQ(
      query.Get("encoder_queue_depth", {{"model", "m1"}, {"scheme", "rope"}}),
      0);
}

}  // namespace
}  // namespace encoder::metrics

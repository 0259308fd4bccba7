// encoder-hub: Hugging Face Hub models in the Hugging Face cache
// (server/hub/hub.h), from the command line.
//
//   encoder-hub download ORG/NAME[@REV] [--cache DIR] [--token-file F] ...
//       fetches the files a model needs; prints the snapshot directory
//   encoder-hub resolve ORG/NAME[@REV] [--cache DIR]
//       finds the cached snapshot without the network; prints it
//   encoder-hub env
//       the cache, endpoint, offline switch and token file the environment
//       gives (as huggingface_hub reads them), as JSON
//
// Errors go to stderr with a non-zero exit: 1 for a failed download or
// resolve, CLI11's code (105-109) for a malformed command line.
#include <chrono>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "server/hub/hub.h"

namespace {

using encoder::hub::DownloadOptions;
using encoder::hub::DownloadProgress;

std::string Megabytes(int64_t bytes) {
  return absl::StrFormat("%.1f MB", static_cast<double>(bytes) / 1e6);
}

std::string Duration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  return s >= 3600
             ? absl::StrFormat("%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60)
             : absl::StrFormat("%ld:%02ld", s / 60, s % 60);
}

// A progress line on stderr at most every `interval_s` seconds: bytes,
// rate and time left, over every file still to fetch.
class ProgressLine {
 public:
  explicit ProgressLine(double interval_s) : interval_s_(interval_s) {}

  void operator()(const DownloadProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (!started_) {
      started_ = true;
      start_ = last_ = now;
      start_done_ = p.done;
    }
    const double since_last =
        std::chrono::duration<double>(now - last_).count();
    if (p.file.empty() || since_last < interval_s_ || p.total <= 0) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate =
        elapsed > 0 ? static_cast<double>(p.done - start_done_) / elapsed : 0;
    const std::string eta =
        rate > 0 ? Duration(static_cast<double>(p.total - p.done) / rate) : "?";
    std::fprintf(stderr, "%s: %s of %s (%.0f%%), %.1f MB/s, %s left\n",
                 p.file.c_str(), Megabytes(p.done).c_str(),
                 Megabytes(p.total).c_str(), 100.0 * p.done / p.total,
                 rate / 1e6, eta.c_str());
  }

 private:
  double interval_s_;
  bool started_ = false;
  std::chrono::steady_clock::time_point start_, last_;
  int64_t start_done_ = 0;
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "encoder-hub: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Hugging Face Hub models in the Hugging Face cache (the layout the "
      "huggingface_hub library reads and writes)"};
  app.require_subcommand(1);
  std::string spec, cache;
  DownloadOptions options;
  double progress_interval_s = 2;
  bool quiet = false;

  CLI::App* download = app.add_subcommand(
      "download",
      "fetch the files a model needs (config, tokenizer, sentence-"
      "transformers modules, safetensors) and print its snapshot directory");
  CLI::App* resolve = app.add_subcommand(
      "resolve", "print the cached snapshot directory without the network");
  CLI::App* env = app.add_subcommand(
      "env",
      "print the cache, endpoint, offline switch and token file the "
      "environment gives, as JSON");
  CLI::App* import = app.add_subcommand(
      "import",
      "lay out a model directory (as a package ships it) in the cache as "
      "ORG/NAME[@BRANCH], so that --model-id ORG/NAME finds it offline; "
      "prints its snapshot directory (exit 3 when the cache already holds "
      "that revision)");
  std::string import_dir;
  import->add_option("dir", import_dir, "the model directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  for (CLI::App* sub : {download, resolve, import}) {
    sub->add_option("model", spec, "ORG/NAME or ORG/NAME@REVISION")->required();
    sub->add_option("--cache", cache,
                    "the hub cache (default: $HF_HUB_CACHE, else "
                    "$HF_HOME/hub, else ~/.cache/huggingface/hub)");
  }
  download->add_option("--token-file", options.token_file,
                       "file holding the access token (default: $HF_TOKEN, "
                       "else $HF_TOKEN_PATH, else $HF_HOME/token)");
  download->add_option("--endpoint", options.endpoint,
                       "the Hub's URL (default: $HF_ENDPOINT, else "
                       "https://huggingface.co)");
  download
      ->add_option("--connect-timeout", options.connect_timeout_s,
                   "seconds to connect to a server")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  download
      ->add_option("--metadata-timeout", options.metadata_timeout_s,
                   "seconds for a metadata request (model info, HEAD)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  download
      ->add_option("--low-speed-limit", options.low_speed_bytes_per_s,
                   "bytes/s under which a transfer counts as stalled; 0: "
                   "no stall detection")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  download
      ->add_option("--low-speed-time", options.low_speed_time_s,
                   "seconds of stall before a transfer is abandoned")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  download
      ->add_option("--retries", options.max_retries,
                   "transfers of a file resumed after a dropped "
                   "connection or a stall")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  download
      ->add_option("--lock-timeout", options.lock_timeout_s,
                   "seconds to wait for another process's download of "
                   "the same file; 0 waits forever")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  download
      ->add_option("--progress-interval", progress_interval_s,
                   "seconds between progress lines on stderr")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  download->add_flag("--quiet", quiet, "no progress lines");
  CLI11_PARSE(app, argc, argv);

  if (env->parsed()) {
    const encoder::hub::EnvLookup lookup = encoder::hub::ProcessEnv();
    const nlohmann::json out = {
        {"cache", encoder::hub::HubCacheDir("", lookup)},
        {"endpoint", encoder::hub::Endpoint(lookup)},
        {"offline", encoder::hub::OfflineMode(lookup)},
        {"token_path", encoder::hub::TokenPath(lookup)}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }

  auto ref = encoder::hub::ParseRepoRef(spec);
  if (!ref.ok()) return Fail(ref.status());
  options.cache_dir = cache;
  absl::StatusOr<std::string> snapshot;
  if (resolve->parsed()) {
    snapshot = encoder::hub::ResolveCached(ref->repo_id, ref->revision, cache);
  } else if (import->parsed()) {
    snapshot = encoder::hub::ImportDirectory(import_dir, ref->repo_id,
                                             ref->revision, cache);
    if (absl::IsAlreadyExists(snapshot.status())) {
      std::fprintf(stderr, "%s\n",
                   std::string(snapshot.status().message()).c_str());
      return 3;
    }
  } else {
    if (!quiet) options.progress = ProgressLine(progress_interval_s);
    snapshot = encoder::hub::Download(ref->repo_id, ref->revision, options);
  }
  if (!snapshot.ok()) return Fail(snapshot.status());
  std::printf("%s\n", snapshot->c_str());
  return 0;
}

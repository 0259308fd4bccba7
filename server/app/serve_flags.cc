#include "server/app/serve_flags.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/app/flag_units.h"
#include "server/app/tei_flags.h"
#include "server/common/status_macros.h"

namespace encoder {

std::string ResolveHttpListen(const std::string& http_listen,
                              const std::string& grpc_listen) {
  if (http_listen.empty() || http_listen == "off") return "";
  if (http_listen != "auto") return http_listen;
  const size_t colon = grpc_listen.rfind(':');
  const bool free_port =
      colon != std::string::npos && grpc_listen.substr(colon + 1) == "0";
  return free_port ? ":0" : ":8080";
}

absl::Status FinishServeFlags(ServeFlags& f, std::vector<std::string>* notes) {
  RETURN_IF_ERROR(FinishTeiFlags(f, notes));
  notes->insert(notes->end(), f.spelling_notes.begin(), f.spelling_notes.end());
  if (f.server.listen == "off") f.server.listen.clear();
  f.http_listen = ResolveHttpListen(f.http_listen, f.server.listen);
  if (f.server.listen.empty() && f.http_listen.empty()) {
    return absl::InvalidArgumentError(
        "--listen=off and --http-listen=off: no port to serve on; keep one");
  }
  return absl::OkStatus();
}

namespace {

// The gRPC and HTTP listen addresses.
void DefineListenFlags(CLI::App& app, ServeFlags& f) {
  app.add_option("--listen,--grpc-listen", f.server.listen,
                 "gRPC listen address HOST:PORT (port 0 picks a free port); "
                 "off: no gRPC port (the HTTP port alone)")
      ->capture_default_str();
  app.add_option("--http-listen,--metrics-listen", f.http_listen,
                 "HTTP port HOST:PORT (\":PORT\" binds --http-address): "
                 "text-embeddings-inference's routes, OpenAI-compatible "
                 "/v1/embeddings, /health, /ready, /info and Prometheus "
                 "/metrics. auto: port 8080 on --http-address, or a free "
                 "port (in --ready-file) when --listen's port is 0; off: no "
                 "HTTP port and no metrics")
      ->capture_default_str();
}

// Where the models come from: a repository file or checkpoint directories.
void DefineModelSourceFlags(CLI::App& app, ServeFlags& f) {
  app.add_option("--models,--repository", f.models,
                 "model repository JSON file; with no --model-dir either, "
                 "the built-in models (none, sinusoidal, learned, rope, "
                 "alibi, relative) are served");
  app.add_option("--model-dir", f.model_dirs,
                 "Hugging Face checkpoint directory, DIR or NAME=DIR "
                 "(repeatable, or comma-separated; the name defaults to "
                 "DIR's base name)")
      ->delimiter(',');
  app.add_option("--model-id", f.model_ids,
                 "Hugging Face Hub model ORG/ID[@REVISION], NAME=ORG/ID to "
                 "serve it as NAME (default: ORG/ID), or a directory "
                 "(repeatable, or comma-separated; MODEL_ID when none): "
                 "found in the Hugging Face cache, downloaded into it first "
                 "unless offline")
      ->delimiter(',');
  app.add_option("--revision", f.revision,
                 "branch, tag or commit of --model-id values that name none "
                 "(default main)");
  app.add_option("--huggingface-hub-cache,--hub-cache", f.hub_cache,
                 "the Hugging Face cache; empty: HF_HUB_CACHE, else "
                 "HF_HOME/hub, else ~/.cache/huggingface/hub (as "
                 "huggingface_hub)");
  app.add_option("--hf-token-file", f.hf_token_file,
                 "file holding the Hub token for gated or private models; "
                 "empty: HF_TOKEN, else HF_HOME/token");
  app.add_flag("--hub-offline,!--no-hub-offline", f.hub_offline,
               "never reach the Hub: --model-id only from the cache (also "
               "HF_HUB_OFFLINE=1)");
  app.add_option("--served-model-name", f.served_model_name,
                 "the name the first listed model is served under (its own "
                 "name stays an alias), as text-embeddings-inference's flag");
  app.add_option("--model-alias", f.model_aliases,
                 "ALIAS=MODEL: another name requests may give MODEL "
                 "(repeatable, or comma-separated)")
      ->delimiter(',');
  app.add_flag("--strict-model-names,!--no-strict-model-names",
               f.strict_model_names,
               "refuse a request naming no served model or alias even when "
               "one model is served (without it a lone model answers every "
               "name, as text-embeddings-inference does)")
      ->capture_default_str();
  app.add_flag("--builtin-models,!--no-builtin-models", f.builtin_models,
               "serve the built-in models (none, sinusoidal, learned, rope, "
               "alibi, relative) beside the listed ones; they are served "
               "alone when no model is listed")
      ->capture_default_str();
  app.add_option("--model-dir-pooling", f.model_dir_pooling,
                 "pooling for --model-dir models: mean | first | max | "
                 "last_token | weighted_mean; empty: the checkpoint's "
                 "sentence-transformers choice, else mean");
  app.add_option("--rope-scaling", f.rope_scalings,
                 "NAME=JSON: serve the checkpoint named NAME with this rotary "
                 "scaling instead of its config.json's, e.g. "
                 "'long={\"rope_type\":\"yarn\",\"factor\":4}' "
                 "(rope_parameters' keys; {\"rope_type\":\"default\"} "
                 "removes one). Repeatable; name one directory twice "
                 "(--model-dir A=DIR --model-dir B=DIR) to serve it under "
                 "two scalings");
  app.add_option("--rerank-template", f.rerank_templates,
                 "NAME=TEMPLATE: rerank on the checkpoint named NAME through "
                 "a prompt, as instruction-following rerankers read a query "
                 "and a document: a built-in name (qwen3-reranker) or a JSON "
                 "object {\"body\": \"... {query} ... {document}\", "
                 "\"prefix\", \"suffix\", \"instruction\", \"yes\", "
                 "\"no\", \"base\"}. A causal language model without a "
                 "classification head is scored by its yes and no logits. "
                 "Repeatable");
  app.add_flag("--strip-text,!--no-strip-text", f.strip_text,
               "strip every text's leading and trailing whitespace (Python's "
               "str.strip) before tokenizing, as sentence-transformers up to "
               "5.3 did; 5.4 on, text-embeddings-inference and this default "
               "keep it (a repository entry's strip_text overrides)")
      ->capture_default_str();
}

// The device, the thread pools, and the reuse and return of freed memory.
void DefineComputeFlags(CLI::App& app, ServeFlags& f) {
  app.add_option("--device", f.device, "auto | cpu | cuda | cuda:N")
      ->capture_default_str();
  app.add_option("--intra-op-threads", f.intra_op_threads,
                 "LibTorch intra-op threads of each running batch (oneDNN's "
                 "int8 and bfloat16 products use them); 0: the usable cores "
                 "over the batches that may run at once "
                 "(--executions-per-model), at least 1")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_flag("--share-intra-op-threads{true}", f.share_intra_op,
               "auto | true | false (the flag alone: true). True, with "
               "--intra-op-threads=0 on a CPU: a batch that starts alone "
               "takes every usable core for its products (on one thread kept "
               "for that) and batches side by side split them, where "
               "LibTorch multiplies on its OpenMP threads (the wheel's MKL "
               "build; not with OpenBLAS, whose own pool is split so "
               "always). Faster for a lone caller; a batch's thread count "
               "then depends on the load. auto: true with 2 or 3 usable "
               "cores, where a batch beside another gets one thread")
      ->transform(CLI::Validator(
          [&f](std::string& value) {
            if (value == "on" || value == "off") {
              f.spelling_notes.push_back(
                  absl::StrCat("--share-intra-op-threads ", value,
                               ": on and off are "
                               "the old spellings (refused from 1.0); write ",
                               value == "on" ? "true" : "false"));
              value = value == "on" ? "true" : "false";
            }
            return std::string();
          },
          "", ""))
      ->check(CLI::IsMember({"auto", "true", "false"}))
      ->capture_default_str();
  app.add_option("--one-thread-below-mflop", f.one_thread_below_mflop,
                 "a CPU batch of fewer million floating-point operations "
                 "than this (estimated from the model's shape and the "
                 "batch's tokens) runs on one thread: waking the intra-op "
                 "threads for it, and their spinning after it, cost more "
                 "than they save; 0: every batch uses its intra-op threads")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  app.add_option("--blas-threads", f.blas_threads,
                 "OpenBLAS's thread pool when LibTorch uses OpenBLAS; 0: "
                 "every usable core (CPU affinity and the cgroup's CPU "
                 "quota)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--executions-per-model", f.executions_per_model,
                 "batches of one model that may run at once, each on its own "
                 "thread, so a free core takes the next batch while one "
                 "computes; running batches split the OpenBLAS threads "
                 "between them (a repository entry's batching.executions "
                 "overrides); 0: the usable cores, at most 2, on a CPU, 1 on "
                 "a GPU")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--cpu-buffer-cache-bytes", f.cpu_buffer_cache_bytes,
                 "freed CPU tensor buffers of 256 KiB or more kept for reuse "
                 "by the next batches, up to this many bytes (saves the "
                 "page faults of re-mapping them); 0: off")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--malloc-trim-idle,--malloc-trim-idle-ms", f.trim.idle_ms,
                 "once the process has been quiet (under 5% of a core) this "
                 "long after doing work, free heap memory goes back to the "
                 "system, so the resident set falls after a burst; 0: never")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

// Message sizes, the memory limit and the budgets derived from it, and
// per-connection limits.
void DefineLimitFlags(CLI::App& app, ServeFlags& f) {
  app.add_option("--max-receive-message-bytes",
                 f.server.max_receive_message_bytes,
                 "largest request message accepted")
      ->capture_default_str();
  app.add_option("--max-send-message-bytes", f.limits.max_send_message_bytes,
                 "largest response; larger ones are refused before compute "
                 "with RESOURCE_EXHAUSTED")
      ->capture_default_str();
  app.add_option("--max-inputs-per-request,--max-client-batch-size",
                 f.limits.max_inputs_per_request, "inputs per Embed request")
      ->capture_default_str();
  app.add_option("--max-tokenize-texts-per-request",
                 f.limits.max_tokenize_texts_per_request,
                 "texts per Tokenize call and id lists per Decode call, on "
                 "gRPC and HTTP (/tokenize, /decode) alike")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--max-chunks-per-input", f.limits.max_chunks_per_input,
                 "windows one input may be embedded in when a request chunks "
                 "long inputs (long_input)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--long-input",
         [&f](const std::string& name) {
           f.limits.long_input = *ParseLongInputPolicy(name);
         },
         "what an input past its model's length gets when the "
         "request names no long_input policy and the model's "
         "repository entry none: truncate (as text-embeddings-"
         "inference's --auto-truncate; responses count the dropped "
         "tokens), refuse, chunk, late_chunk, extrapolate, or auto "
         "(each model's reach measured at load: inputs run whole up to "
         "the longest length at which its pooled vector moves at most "
         "--long-input-drift, in windows beyond; ListModels says which "
         "and why). A request's truncate false refuses")
      ->check(CLI::IsMember(LongInputPolicyNames()))
      ->default_str(std::string(LongInputPolicyName(f.limits.long_input)));
  app.add_option("--long-input-drift", f.host.long_input_drift,
                 "--long-input auto: the relative change of a model's pooled "
                 "vector, on a repeated input past its length against the "
                 "same input within it, up to which inputs run whole; 0: "
                 "not measured, auto decides by the scheme's parameters "
                 "(extrapolate for ALiBi and relative buckets, and for a "
                 "scaled rotary code up to the length its scaling reaches)")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  app.add_option("--memory-limit-bytes", f.host.memory_limit_bytes,
                 "memory the process may use; 0: the cgroup limit, else the "
                 "machine's RAM. The defaults below derive from it")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50))
      ->capture_default_str();
  app.add_option("--batch-memory-budget-bytes",
                 f.host.batch_memory_budget_bytes,
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
                 f.limits.unread.per_connection_bytes,
                 "the same, per client connection: a client that stops "
                 "reading gets RESOURCE_EXHAUSTED for new calls on its "
                 "connection once this much waits for it")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--max-concurrent-streams", f.server.max_concurrent_streams,
                 "calls in flight per client connection, health Watch "
                 "streams included (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); "
                 "further calls wait in the client")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-health-watchers", f.server.max_health_watchers,
                 "grpc.health.v1 Watch calls open at once, all connections "
                 "together; more get RESOURCE_EXHAUSTED (0: no limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24))
      ->capture_default_str();
}

// How sequences are batched and queued (runner::HostOptions::batching).
void DefineBatchingFlags(CLI::App& app, ServeFlags& f) {
  app.add_option("--max-batch-sequences,--max-batch-requests",
                 f.host.batching.max_batch_sequences,
                 "sequences per forward pass")
      ->capture_default_str();
  app.add_option("--max-batch-tokens", f.host.batching.max_batch_tokens,
                 "longest length x sequences per forward pass")
      ->capture_default_str();
  app.add_option_function<int64_t>(
         "--max-queue-delay,--max-queue-delay-us",
         [&f](const int64_t& us) {
           f.host.batching.max_queue_delay = absl::Microseconds(us);
         },
         "how long the oldest queued sequence may wait for company")
      ->check(CLI::NonNegativeNumber)
      ->default_str(std::to_string(
          absl::ToInt64Microseconds(f.host.batching.max_queue_delay)));
  app.add_option_function<int64_t>(
         "--max-batch-time,--max-batch-ms",
         [&f](const int64_t& ms) {
           f.host.batching.max_batch_time = absl::Milliseconds(ms);
         },
         "upper bound on a batch's expected compute time, from the model's "
         "measured rate (0: none): a small call waits about this long for a "
         "large request's batch; a single sequence expected to take over 4x "
         "this runs alone and never takes a model's last free execution")
      ->check(CLI::NonNegativeNumber)
      ->default_str(std::to_string(
          absl::ToInt64Milliseconds(f.host.batching.max_batch_time)));
  app.add_option("--max-queued-sequences,--max-concurrent-requests",
                 f.host.batching.max_queued_sequences,
                 "queued sequences per model beyond which calls fail at once "
                 "with RESOURCE_EXHAUSTED")
      ->capture_default_str();
  app.add_flag("--fair-share,!--no-fair-share", f.host.batching.fair_share,
               "interleave requests in batches (every queued request's "
               "oldest sequence before further ones), so a small call waits "
               "about one batch behind a large request; off: strict arrival "
               "order")
      ->capture_default_str();
}

// The shutdown on SIGTERM/SIGINT.
void DefineDrainFlags(CLI::App& app, ServeFlags& f) {
  app.add_option("--drain-grace,--drain-grace-seconds", f.drain_grace_seconds,
                 "on SIGTERM/SIGINT, how long accepted calls may take")
      ->capture_default_str();
  app.add_option("--drain-unready,--drain-unready-seconds",
                 f.drain_unready_seconds,
                 "on SIGTERM/SIGINT, how long new calls keep getting "
                 "UNAVAILABLE (health NOT_SERVING) before the transport "
                 "closes, so balancers move traffic away first")
      ->capture_default_str();
}

// The limits of the Diagnose call.
void DefineDiagnoseFlags(CLI::App& app, ServeFlags& f) {
  app.add_option("--max-diagnose-tokens", f.diagnose.max_tokens,
                 "input length accepted by Diagnose")
      ->capture_default_str();
  app.add_option("--max-structure-positions",
                 f.diagnose.max_structure_positions,
                 "positions N of Diagnose's Gram and bias matrices")
      ->capture_default_str();
  app.add_option("--max-pending-diagnose", f.diagnose.max_pending,
                 "Diagnose calls waiting or running at once, across models; "
                 "more are refused with RESOURCE_EXHAUSTED")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-extrapolation-tokens",
                 f.diagnose.max_extrapolation_tokens,
                 "longest input Diagnose's extrapolation probe runs, and an "
                 "Embed that extrapolates long inputs (a repository entry's "
                 "max_extrapolation_tokens overrides it)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

// How the forward pass runs: padding skipping and fused attention.
void DefineForwardFlags(CLI::App& app, ServeFlags& f) {
  app.add_option("--skip-padding-min-share", f.host.skip_padding_min_share,
                 "share of padding in a batch from which the projections, "
                 "feed-forward and norms run on the real tokens alone, and "
                 "on the CPU attention on each input's own length; 1: never")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_flag("--fused-attention,!--no-fused-attention",
               f.host.fused_attention,
               "attention that returns no maps runs the fused "
               "scaled_dot_product_attention kernel (LibTorch 2.1 and later; "
               "ignored on older ones)")
      ->capture_default_str();
  app.add_flag("--cudnn-attention,!--no-cudnn-attention",
               f.host.cudnn_attention,
               "on CUDA, the fused attention kernel may choose cuDNN's; "
               "off (the default), it chooses among flash and "
               "memory-efficient attention, which served half precision "
               "faster with steadier p99 (LibTorch 2.4 and later)")
      ->capture_default_str();
}

// Start-up: warm-up, batch profiling and the ready file.
void DefineStartupFlags(CLI::App& app, ServeFlags& f) {
  app.add_flag("--warm-up,!--no-warm-up", f.host.warm_up,
               "run one forward per model before serving")
      ->capture_default_str();
  app.add_option_function<int64_t>(
         "--batch-profile-time,--batch-profile-ms",
         [&f](const int64_t& ms) {
           f.host.batch_profile_budget = absl::Milliseconds(ms);
         },
         "time each distinct model shape may spend at start-up "
         "measuring sequences/s by batch size and length; batches "
         "are then capped where bigger ones ran slower (0: fixed "
         "caps only)")
      ->check(CLI::Range(int64_t{0}, int64_t{600000}))
      ->default_str(std::to_string(
          absl::ToInt64Milliseconds(f.host.batch_profile_budget)));
  app.add_option("--ready-file", f.ready_file,
                 "once serving, write {\"grpc_port\": P, \"http_port\": "
                 "W, \"metrics_port\": W, \"health_port\": H} here "
                 "(atomically)");
}

// Log level, format and rate limit, and the request id length.
void DefineLoggingFlags(CLI::App& app, ServeFlags& f) {
  app.add_option("--log-level", f.log_level,
                 "trace | debug | info | warn | error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
  app.add_option("--log-format", f.log_format,
                 "text | json (one JSON object per line: ts, level, msg and "
                 "each access-log field as a key)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--log-rate-limit", f.log.rate_limit_per_second,
                 "warning and error lines of one kind (same message, or same "
                 "method, status and error for access lines) logged per "
                 "second at most; the rest are counted in a \"suppressed K "
                 "similar log lines\" line. 0: no limit")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--log-rate-limit-keys", f.log.rate_limit_keys,
                 "kinds of lines the log rate limit tracks at once; lines of "
                 "further kinds share one while the table is full")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  app.add_option("--max-request-id-bytes", f.max_request_id_bytes,
                 "longest request id (request_id field, x-request-id) a "
                 "caller may set; a longer one, or one with characters "
                 "outside printable ASCII, is replaced by a generated id")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
}

}  // namespace

void DefineServeFlags(CLI::App& app, ServeFlags& f) {
  DefineListenFlags(app, f);
  DefineModelSourceFlags(app, f);
  DefineComputeFlags(app, f);
  DefineLimitFlags(app, f);
  DefineBatchingFlags(app, f);
  DefineDrainFlags(app, f);
  DefineDiagnoseFlags(app, f);
  DefineForwardFlags(app, f);
  DefineStartupFlags(app, f);
  DefineLoggingFlags(app, f);
  DefineTeiFlags(app, f);
}

void AddConfigFile(CLI::App& app) {
  app.set_config("--config", "",
                 "a TOML file of flags by their long names, e.g. "
                 "max-batch-tokens = 8192 (docs/configuration.md); the "
                 "command line wins over it, and it over the environment");
  // A misspelt key would otherwise set nothing, silently.
  app.allow_config_extras(CLI::config_extras_mode::error);
}

// Every option can also come from ENCODER_<NAME> (EnvironmentName). CLI11
// reads the variable only when the option is not on the command line.
void AddEnvironmentNames(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string& name = option->get_single_name();
    if (name.empty() || name == "help" || name == "help-all" ||
        name == "version" || name == "config") {
      continue;
    }
    option->envname(EnvironmentName(name));
  }
}

}  // namespace encoder

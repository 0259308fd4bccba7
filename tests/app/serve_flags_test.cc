// encoder-server's flags land in the option structs they are bound to, with
// those structs' defaults, from the command line or the environment.
#include "server/app/serve_flags.h"
#include "server/app/flag_units.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "server/app/tei_flags.h"
#include "server/common/status_macros.h"

namespace encoder {
namespace {

// Defines the serve flags on `app` bound to `flags` and parses `args`
// (without the program name).
void ParseInto(CLI::App& app, ServeFlags& flags,
               const std::vector<std::string>& args) {
  DefineServeFlags(app, flags);
  AddEnvironmentNames(app);
  AddValueSyntax(app, &flags.spelling_notes);
  std::vector<const char*> argv = {"encoder-server"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
}

// Parses `args` into fresh flags.
ServeFlags Parse(std::vector<std::string> args) {
  CLI::App app("test", "encoder-server");
  ServeFlags flags;
  ParseInto(app, flags, args);
  return flags;
}

TEST(ServeFlags, NoFlagsLeaveTheOptionStructsAtTheirDefaults) {
  const ServeFlags parsed = Parse({});
  const service::ServerOptions server;
  const runner::HostOptions host;
  const core::ServiceLimits limits;
  const core::DiagnoseLimits diagnose;
  EXPECT_EQ(parsed.server.listen, server.listen);
  EXPECT_EQ(parsed.server.max_receive_message_bytes,
            server.max_receive_message_bytes);
  EXPECT_EQ(parsed.server.max_concurrent_streams,
            server.max_concurrent_streams);
  EXPECT_EQ(parsed.limits.unread.per_connection_bytes,
            limits.unread.per_connection_bytes);
  EXPECT_EQ(parsed.limits.max_inputs_per_request,
            limits.max_inputs_per_request);
  EXPECT_EQ(parsed.limits.long_input, limits.long_input);
  EXPECT_EQ(parsed.diagnose.max_pending, diagnose.max_pending);
  EXPECT_EQ(parsed.diagnose.max_extrapolation_tokens,
            diagnose.max_extrapolation_tokens);
  EXPECT_EQ(parsed.host.batching.max_batch_sequences,
            host.batching.max_batch_sequences);
  EXPECT_EQ(parsed.host.batching.max_batch_tokens,
            host.batching.max_batch_tokens);
  EXPECT_EQ(parsed.host.batching.max_queue_delay,
            host.batching.max_queue_delay);
  EXPECT_EQ(parsed.host.batching.fair_share, host.batching.fair_share);
  EXPECT_EQ(parsed.host.batch_profile_budget, host.batch_profile_budget);
  EXPECT_EQ(parsed.host.warm_up, host.warm_up);
  EXPECT_EQ(parsed.host.skip_padding_min_share, host.skip_padding_min_share);
  EXPECT_EQ(parsed.executions_per_model, 0);
  EXPECT_EQ(parsed.intra_op_threads, 0);
  EXPECT_EQ(parsed.trim.idle_ms, runner::IdleTrimOptions{}.idle_ms);
  EXPECT_EQ(parsed.log.rate_limit_per_second,
            logging::LogOptions{}.rate_limit_per_second);
  EXPECT_EQ(parsed.log.rate_limit_keys, logging::LogOptions{}.rate_limit_keys);
  EXPECT_EQ(parsed.max_request_id_bytes,
            static_cast<int64_t>(logging::kDefaultMaxRequestIdBytes));
}

TEST(ServeFlags, HttpPortIsOnByDefault) {
  EXPECT_EQ(Parse({}).http_listen, "auto");
  // auto: 8080 on --http-address, or a free port beside a free gRPC port.
  EXPECT_EQ(ResolveHttpListen("auto", "127.0.0.1:50051"), ":8080");
  EXPECT_EQ(ResolveHttpListen("auto", "127.0.0.1:0"), ":0");
  EXPECT_EQ(ResolveHttpListen("auto", "[::]:0"), ":0");
  EXPECT_EQ(ResolveHttpListen("auto", "[::]:8000"), ":8080");
  EXPECT_EQ(ResolveHttpListen("off", "127.0.0.1:0"), "");
  EXPECT_EQ(ResolveHttpListen("", "127.0.0.1:0"), "");
  EXPECT_EQ(ResolveHttpListen("0.0.0.0:9000", "127.0.0.1:0"), "0.0.0.0:9000");
  EXPECT_EQ(Parse({"--http-listen=off"}).http_listen, "off");
}

TEST(ServeFlags, BuiltinModelsBesideTheListedOnes) {
  const size_t builtins = model::BuiltinRepository().models.size();
  ServeFlags alone = Parse({"--model-dir=m=/nonexistent/dir"});
  auto listed = BuildRepository(alone);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->models.size(), 1u);
  ServeFlags beside =
      Parse({"--model-dir=m=/nonexistent/dir", "--builtin-models"});
  auto both = BuildRepository(beside);
  ASSERT_TRUE(both.ok()) << both.status();
  ASSERT_EQ(both->models.size(), 1 + builtins);
  EXPECT_EQ(both->models[0].name, "m");
  EXPECT_EQ(both->default_model, "m");  // the listed model stays default
  ServeFlags clash = Parse({"--model-dir=rope=/dir", "--builtin-models"});
  auto refused = BuildRepository(clash);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(refused.status().message()).find("\"rope\""),
            std::string::npos)
      << refused.status();
}

// --rope-scaling NAME=JSON: onto the checkpoint served as NAME (one
// directory may be listed twice, under two scalings); a name no
// checkpoint has, or no '=', is refused.
TEST(ServeFlags, RopeScalingGoesToTheNamedCheckpoint) {
  const std::string yarn = R"({"rope_type":"yarn","factor":4})";
  auto repo = BuildRepository(
      Parse({"--model-dir=plain=/dir/q", "--model-dir=long=/dir/q",
             "--rope-scaling=long=" + yarn}));
  ASSERT_TRUE(repo.ok()) << repo.status();
  ASSERT_EQ(repo->models.size(), 2u);
  EXPECT_EQ(repo->models[0].rope_scaling, "");
  EXPECT_EQ(repo->models[1].rope_scaling, yarn);
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--model-dir=a=/dir/a",
                                 "--rope-scaling=b=" + yarn},
        std::vector<std::string>{"--rope-scaling=rope=" + yarn},
        std::vector<std::string>{"--model-dir=a=/dir/a", "--rope-scaling=a"}}) {
    auto refused = BuildRepository(Parse(bad));
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << bad.back();
    EXPECT_NE(std::string(refused.status().message()).find("--rope-scaling"),
              std::string::npos)
        << refused.status();
  }
}

TEST(ServeFlags, ServedNamesAndAliases) {
  ServeFlags f = Parse({"--model-dir=a=/dir/a", "--model-dir=b=/dir/b",
                        "--served-model-name=first", "--model-alias=bee=b"});
  auto repo = BuildRepository(f);
  ASSERT_TRUE(repo.ok()) << repo.status();
  EXPECT_EQ(repo->models[0].name, "first");
  EXPECT_EQ(repo->default_model, "first");
  EXPECT_EQ(repo->aliases.at("a"), "first");  // the old name still answers
  EXPECT_EQ(repo->aliases.at("bee"), "b");
  EXPECT_FALSE(repo->strict_names);
  EXPECT_TRUE(
      BuildRepository(Parse({"--model-dir=a=/dir/a", "--strict-model-names"}))
          ->strict_names);
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--model-dir=a=/d", "--model-dir=b=/e",
                                 "--served-model-name=b"},
        std::vector<std::string>{"--model-dir=a=/d", "--model-alias=x=nope"},
        std::vector<std::string>{"--model-dir=a=/d", "--model-dir=b=/e",
                                 "--model-alias=b=a"},
        std::vector<std::string>{"--model-dir=a=/d", "--model-alias=x"}}) {
    auto refused = BuildRepository(Parse(bad));
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << bad.back();
  }
}

// Parse, then FinishServeFlags.
absl::StatusOr<ServeFlags> Finish(std::vector<std::string> args,
                                  std::vector<std::string>* notes) {
  ServeFlags f = Parse(std::move(args));
  RETURN_IF_ERROR(FinishServeFlags(f, notes));
  return f;
}

TEST(ServeFlags, TextEmbeddingsInferenceFlags) {
  std::vector<std::string> notes;
  // TEI's README: text-embeddings-router --model-id $model --port 8080.
  auto f =
      Finish({"--model-id=org/model", "--port", "8081", "--max-batch-requests",
              "7", "--max-client-batch-size", "9", "--max-concurrent-requests",
              "11", "--json-output", "--auto-truncate", "--pooling", "cls",
              "--hf-token", "hf_x", "--tokenization-workers", "3"},
             &notes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->model_ids, std::vector<std::string>{"org/model"});
  EXPECT_EQ(f->http_listen, ":8081");
  EXPECT_EQ(f->host.batching.max_batch_sequences, 7);
  EXPECT_EQ(f->limits.max_inputs_per_request, 9);
  EXPECT_EQ(f->host.batching.max_queued_sequences, 11);
  EXPECT_EQ(f->log_format, "json");
  EXPECT_EQ(f->limits.long_input, LongInputPolicy::kTruncate);
  EXPECT_EQ(f->model_dir_pooling, "first");
  EXPECT_EQ(f->tei.hf_token, "hf_x");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("--tokenization-workers 3 has no effect"),
            std::string::npos)
      << notes[0];

  notes.clear();
  f = Finish({"--auto-truncate=false", "--pooling=last-token"}, &notes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->limits.long_input, LongInputPolicy::kRefuse);
  EXPECT_EQ(f->model_dir_pooling, "last_token");
  EXPECT_EQ(f->http_listen, ":8080");  // auto, beside a fixed gRPC port

  for (const auto& [args, needle] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--port=9000", "--http-listen=:9001"}, "both set the HTTP port"},
           {{"--pooling=splade"}, "SpladePooling"},
           {{"--pooling=cls", "--model-dir-pooling=mean"}, "give one"},
           {{"--cors-allow-origin=*"}, "--cors-allow-origin"},
           {{"--default-prompt-name=q", "--default-prompt=p: "}, "give one"},
           {{"--auto-truncate=maybe"}, "true or false"}}) {
    auto refused = Finish(args, &notes);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << args[0];
    EXPECT_NE(std::string(refused.status().message()).find(needle),
              std::string::npos)
        << refused.status();
  }
}

TEST(ServeFlags, DefaultPromptFlagsGoToTheCheckpointModels) {
  auto repo = BuildRepository(
      Parse({"--model-dir=a=/dir/a", "--default-prompt-name=query"}));
  ASSERT_TRUE(repo.ok()) << repo.status();
  ASSERT_EQ(repo->models.size(), 1u);
  EXPECT_EQ(repo->models[0].forced_default_prompt_name, "query");
  EXPECT_FALSE(repo->models[0].forced_default_prompt.has_value());
  repo = BuildRepository(
      Parse({"--model-dir=a=/dir/a", "--default-prompt=query: "}));
  ASSERT_TRUE(repo.ok()) << repo.status();
  EXPECT_EQ(repo->models[0].forced_default_prompt, "query: ");
  // The built-in models have no prompts: the flag needs a checkpoint.
  auto none = BuildRepository(Parse({"--default-prompt-name=query"}));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(none.status().message()).find("from a checkpoint"),
            std::string::npos)
      << none.status();
}

TEST(ServeFlags, EachFlagSetsItsStructField) {
  const ServeFlags f = Parse({"--listen=0.0.0.0:9000",
                              "--max-batch-sequences=7",
                              "--max-batch-tokens=999",
                              "--max-queue-delay=250us",
                              "--max-queued-sequences=11",
                              "--no-fair-share",
                              "--batch-profile-time=1500ms",
                              "--no-warm-up",
                              "--memory-limit-bytes=123456789",
                              "--batch-memory-budget-bytes=7654321",
                              "--max-send-message-bytes=1000",
                              "--max-inputs-per-request=5",
                              "--max-concurrent-streams=3",
                              "--max-health-watchers=9",
                              "--max-unread-response-bytes-per-connection=77",
                              "--max-diagnose-tokens=64",
                              "--max-structure-positions=32",
                              "--max-pending-diagnose=2",
                              "--max-extrapolation-tokens=300",
                              "--malloc-trim-idle=0",
                              "--log-rate-limit=4",
                              "--log-rate-limit-keys=100",
                              "--max-request-id-bytes=64",
                              "--skip-padding-min-share=0.25",
                              "--cudnn-attention",
                              "--long-input=auto",
                              "--executions-per-model=3"});
  EXPECT_EQ(f.server.listen, "0.0.0.0:9000");
  EXPECT_EQ(f.host.batching.max_batch_sequences, 7);
  EXPECT_EQ(f.host.batching.max_batch_tokens, 999);
  EXPECT_EQ(f.host.batching.max_queue_delay, absl::Microseconds(250));
  EXPECT_EQ(f.host.batching.max_queued_sequences, 11);
  EXPECT_FALSE(f.host.batching.fair_share);
  EXPECT_EQ(f.host.batch_profile_budget, absl::Milliseconds(1500));
  EXPECT_FALSE(f.host.warm_up);
  EXPECT_EQ(f.host.memory_limit_bytes, 123456789);
  EXPECT_EQ(f.host.batch_memory_budget_bytes, 7654321);
  EXPECT_EQ(f.limits.max_send_message_bytes, 1000);
  EXPECT_EQ(f.limits.max_inputs_per_request, 5);
  EXPECT_EQ(f.server.max_concurrent_streams, 3);
  EXPECT_EQ(f.server.max_health_watchers, 9);
  EXPECT_EQ(f.limits.unread.per_connection_bytes, 77);
  EXPECT_EQ(f.diagnose.max_tokens, 64);
  EXPECT_EQ(f.diagnose.max_structure_positions, 32);
  EXPECT_EQ(f.diagnose.max_pending, 2);
  EXPECT_EQ(f.diagnose.max_extrapolation_tokens, 300);
  EXPECT_EQ(f.trim.idle_ms, 0);
  EXPECT_EQ(f.log.rate_limit_per_second, 4);
  EXPECT_EQ(f.log.rate_limit_keys, 100);
  EXPECT_EQ(f.max_request_id_bytes, 64);
  EXPECT_EQ(f.host.skip_padding_min_share, 0.25);
  EXPECT_TRUE(f.host.cudnn_attention);
  EXPECT_EQ(f.limits.long_input, LongInputPolicy::kAuto);
  EXPECT_EQ(Parse({}).limits.long_input, LongInputPolicy::kTruncate);
  EXPECT_FALSE(Parse({}).host.cudnn_attention);
  EXPECT_EQ(f.executions_per_model, 3);
}

TEST(ServeFlags, EnvironmentSetsAFieldAndTheCommandLineWins) {
  ASSERT_EQ(setenv("ENCODER_MAX_QUEUE_DELAY", "40us", 1), 0);
  ASSERT_EQ(setenv("ENCODER_MAX_BATCH_TOKENS", "4096", 1), 0);
  const ServeFlags f = Parse({"--max-batch-tokens=2048"});
  unsetenv("ENCODER_MAX_QUEUE_DELAY");
  unsetenv("ENCODER_MAX_BATCH_TOKENS");
  EXPECT_EQ(f.host.batching.max_queue_delay, absl::Microseconds(40));
  EXPECT_EQ(f.host.batching.max_batch_tokens, 2048);
}

// --config FILE sets flags by their long names, below the command line
// and above the ENCODER_ variables; an unknown key is refused.
TEST(ServeFlags, ConfigFileSitsBetweenTheCommandLineAndTheEnvironment) {
  const std::string path =
      ::testing::TempDir() + "/serve_flags_config_test.toml";
  auto parse = [&](const std::string& toml, std::vector<std::string> args) {
    std::FILE* file = std::fopen(path.c_str(), "w");
    EXPECT_NE(file, nullptr);
    std::fputs(toml.c_str(), file);
    std::fclose(file);
    CLI::App app("test", "encoder-server");
    ServeFlags f;
    DefineServeFlags(app, f);
    AddConfigFile(app);
    AddEnvironmentNames(app);
    args.insert(args.begin(), "--config=" + path);
    std::vector<const char*> argv = {"encoder-server"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    return f;
  };
  const std::string toml =
      "max-batch-tokens = 1234\n"
      "log-format = \"json\"\n"
      "model-dir = [\"a=/x\", \"b=/y\"]\n"
      "warm-up = false\n";
  ASSERT_EQ(setenv("ENCODER_MAX_BATCH_TOKENS", "999", 1), 0);
  ASSERT_EQ(setenv("ENCODER_LOG_LEVEL", "debug", 1), 0);
  const ServeFlags f = parse(toml, {});
  const ServeFlags cli = parse(toml, {"--max-batch-tokens=7"});
  unsetenv("ENCODER_MAX_BATCH_TOKENS");
  unsetenv("ENCODER_LOG_LEVEL");
  EXPECT_EQ(f.host.batching.max_batch_tokens, 1234);  // over the variable
  EXPECT_EQ(f.log_format, "json");
  EXPECT_EQ(f.log_level, "debug");  // the variable, where the file is silent
  EXPECT_EQ(f.model_dirs, (std::vector<std::string>{"a=/x", "b=/y"}));
  EXPECT_FALSE(f.host.warm_up);
  EXPECT_EQ(cli.host.batching.max_batch_tokens, 7);  // the command line
  EXPECT_THROW(parse("max-batch-tokenz = 1\n", {}), CLI::ConfigError);
  std::remove(path.c_str());
}

// TEI's own variables set the flags the command line and ENCODER_
// variables leave alone, through the flags' checks.
TEST(ServeFlags, TeiEnvironmentVariablesSetTheFlagsLeftUnset) {
  auto apply =
      [](std::vector<std::string> args,
         std::vector<std::string>* notes) -> absl::StatusOr<ServeFlags> {
    CLI::App app("test", "encoder-server");
    ServeFlags f;
    ParseInto(app, f, args);
    ASSIGN_OR_RETURN(*notes, ApplyTeiEnvironment(app));
    RETURN_IF_ERROR(FinishServeFlags(f, notes));
    return f;
  };
  const std::vector<std::pair<const char*, const char*>> vars = {
      {"PORT", "9123"},          {"MAX_BATCH_TOKENS", "1234"},
      {"AUTO_TRUNCATE", "true"}, {"MAX_CLIENT_BATCH_SIZE", "17"},
      {"JSON_OUTPUT", "true"},   {"HOSTNAME", "container-1234"},
      {"API_KEY", "sekrit"}};
  for (const auto& [name, value] : vars) ASSERT_EQ(setenv(name, value, 1), 0);
  ASSERT_EQ(setenv("ENCODER_MAX_INPUTS_PER_REQUEST", "19", 1), 0);
  std::vector<std::string> notes;
  auto f = apply({"--max-batch-tokens=2048"}, &notes);
  unsetenv("ENCODER_MAX_INPUTS_PER_REQUEST");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->http_listen, ":9123");
  EXPECT_EQ(f->host.batching.max_batch_tokens, 2048);  // the command line
  EXPECT_EQ(f->limits.long_input, LongInputPolicy::kTruncate);
  EXPECT_EQ(f->limits.max_inputs_per_request, 19);  // ENCODER_ wins
  EXPECT_EQ(f->log_format, "json");
  bool port_noted = false;
  for (const std::string& n : notes) {
    port_noted = port_noted || n.find("PORT=9123 read as --port") == 0;
    EXPECT_EQ(n.find("sekrit"), std::string::npos) << n;
    EXPECT_EQ(n.find("HOSTNAME"), std::string::npos) << n;  // not read
  }
  EXPECT_TRUE(port_noted);

  // An HTTP address given in full names its port: PORT (as the images
  // set it) yields.
  auto full = apply({"--http-listen=0.0.0.0:9090"}, &notes);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->http_listen, "0.0.0.0:9090");

  ASSERT_EQ(setenv("MAX_BATCH_TOKENS", "many", 1), 0);
  auto bad = apply({}, &notes);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      std::string(bad.status().message()).rfind("MAX_BATCH_TOKENS=many", 0), 0u)
      << bad.status();
  ASSERT_EQ(setenv("MAX_BATCH_TOKENS", "1234", 1), 0);
  ASSERT_EQ(setenv("CORS_ALLOW_ORIGIN", "*", 1), 0);
  auto refused = apply({}, &notes);
  EXPECT_NE(std::string(refused.status().message()).find("--cors-allow-origin"),
            std::string::npos)
      << refused.status();
  unsetenv("CORS_ALLOW_ORIGIN");
  for (const auto& [name, value] : vars) unsetenv(name);
}

// --share-intra-op-threads: auto by default, on as a bare flag, or the
// value given; anything else is refused.
TEST(ServeFlags, ShareIntraOpThreadsIsAutoTrueOrFalse) {
  EXPECT_EQ(Parse({}).share_intra_op, "auto");
  EXPECT_EQ(Parse({"--share-intra-op-threads"}).share_intra_op, "true");
  EXPECT_EQ(Parse({"--share-intra-op-threads=false"}).share_intra_op, "false");
  EXPECT_EQ(Parse({"--share-intra-op-threads=true"}).share_intra_op, "true");
  // on and off: the old spellings, read with a note.
  EXPECT_EQ(Parse({"--share-intra-op-threads=off"}).share_intra_op, "false");
  EXPECT_EQ(Parse({"--share-intra-op-threads=on"}).share_intra_op, "true");
  EXPECT_THROW(Parse({"--share-intra-op-threads=yes"}), CLI::ValidationError);
}

// --one-thread-below-mflop: the measured default, any non-negative number
// (0: off), nothing negative.
TEST(ServeFlags, OneThreadBelowMflopIsANonNegativeNumber) {
  EXPECT_EQ(Parse({}).one_thread_below_mflop,
            runner::kDefaultOneThreadBelowMflop);
  EXPECT_EQ(Parse({"--one-thread-below-mflop=0"}).one_thread_below_mflop, 0);
  EXPECT_EQ(Parse({"--one-thread-below-mflop=12.5"}).one_thread_below_mflop,
            12.5);
  EXPECT_THROW(Parse({"--one-thread-below-mflop=-1"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--one-thread-below-mflop=many"}), CLI::ParseError);
}

TEST(ServeFlags, OutOfRangeValuesAreRefused) {
  EXPECT_THROW(Parse({"--max-queue-delay=-1us"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--max-queue-delay-us=-1"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--max-pending-diagnose=0"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--batch-profile-time=700s"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--skip-padding-min-share=1.5"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--long-input=window"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--executions-per-model=-1"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--executions-per-model=65"}), CLI::ValidationError);
}

}  // namespace
}  // namespace encoder

// The model repository file: the built-in models, and parsing of entries
// with their batching, extrapolation and prompt options.
#include "server/model/weights/model_repository.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace encoder::model {
namespace {

TEST(Repository, BuiltinsCoverEverySchemeAndLoad) {
  Repository repo = BuiltinRepository();
  ASSERT_EQ(repo.models.size(), 6u);
  EXPECT_EQ(repo.default_model, "sinusoidal");
  const std::vector<std::string> names = {"none", "sinusoidal", "learned",
                                          "rope", "alibi",      "relative"};
  for (size_t i = 0; i < repo.models.size(); ++i) {
    EXPECT_EQ(repo.models[i].name, names[i]);
    EXPECT_EQ(repo.models[i].config.d_model, 512);
    EXPECT_EQ(repo.models[i].config.num_heads, 8);
    EXPECT_EQ(repo.models[i].config.d_ff, 2048);
    EXPECT_EQ(repo.models[i].config.vocab_size, 10000);
  }
}

TEST(Repository, ParsesModelsAndRejectsMistakes) {
  auto repo = ParseRepository(
      R"({"default_model": "b", "models": [
            {"name": "a", "config": {"d_model": 16, "num_heads": 2,
             "positional": {"type": "rope", "layout": "half"}}},
            {"name": "b", "config_file": "b.json", "seed": 3,
             "batching": {"max_batch_sequences": 4}}]})",
      "/nonexistent");
  EXPECT_FALSE(repo.ok());  // b.json cannot be read
  EXPECT_NE(std::string(repo.status().message()).find("model \"b\""),
            std::string::npos);
  auto ok = ParseRepository(
      R"({"models": [{"name": "a", "seed": 9, "batching":
           {"max_queue_delay_us": 500, "executions": 3, "max_batch_ms": 100},
           "config": {"d_model": 16, "num_heads": 2,
                      "positional": {"type": "rope", "layout": "half"}}}]})",
      "");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->default_model, "a");
  EXPECT_EQ(ok->models[0].seed, 9u);
  EXPECT_EQ(ok->models[0].batching.max_queue_delay_us, 500);
  EXPECT_FALSE(ok->models[0].batching.max_batch_tokens.has_value());
  EXPECT_EQ(ok->models[0].batching.executions, 3);
  EXPECT_EQ(ok->models[0].batching.max_batch_ms, 100);
  EXPECT_EQ(ok->models[0].config.positional.rope_layout, RopeLayout::kHalf);
  for (const char* bad :
       {R"({"models": []})", R"({"models": [{"name": "a", "wat": 1}]})",
        R"({"models": [{"name": "a"}, {"name": "a"}]})",
        R"({"models": [{"name": "a", "batching": {"executions": 0}}]})",
        R"({"models": [{"name": "a", "batching": {"executions": 65}}]})",
        R"({"models": [{"name": "a"}], "default_model": "z"})",
        R"({"models": [{"name": "a", "config": {"d_model": 10,
             "num_heads": 3}}]})"}) {
    EXPECT_EQ(ParseRepository(bad, "").status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(Repository, ExtrapolationLimitPerModel) {
  auto ok = ParseRepository(
      R"({"models": [{"name": "a", "max_extrapolation_tokens": 4096},
                     {"name": "b"},
                     {"name": "c", "path": "ckpt",
                      "max_extrapolation_tokens": 300}]})",
      "/base");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->models[0].max_extrapolation_tokens, 4096);
  EXPECT_EQ(ok->models[1].max_extrapolation_tokens, 0);  // the flag's
  EXPECT_EQ(ok->models[2].max_extrapolation_tokens, 300);
  for (const char* bad :
       {R"({"models": [{"name": "a", "max_extrapolation_tokens": 0}]})",
        R"({"models": [{"name": "a", "max_extrapolation_tokens": "9"}]})",
        R"({"models": [{"name": "a", "path": "p",
                        "max_extrapolation_tokens": -3}]})"}) {
    auto r = ParseRepository(bad, "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(r.status().message()).find("max_extrapolation"),
              std::string::npos)
        << r.status();
  }
}

TEST(Repository, LongInputPolicyPerModel) {
  auto ok = ParseRepository(
      R"({"models": [{"name": "a", "long_input": "auto"},
                     {"name": "b"},
                     {"name": "c", "path": "ckpt", "long_input": "late_chunk"}]})",
      "/base");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->models[0].long_input, LongInputPolicy::kAuto);
  EXPECT_FALSE(ok->models[1].long_input.has_value());  // the flag's
  EXPECT_EQ(ok->models[2].long_input, LongInputPolicy::kLateChunk);
  for (const char* bad :
       {R"({"models": [{"name": "a", "long_input": "window"}]})",
        R"({"models": [{"name": "a", "path": "p", "long_input": true}]})"}) {
    auto r = ParseRepository(bad, "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(r.status().message()).find("long_input must be"),
              std::string::npos)
        << r.status();
  }
}

TEST(Repository, StripTextPerModel) {
  auto ok = ParseRepository(
      R"({"models": [{"name": "a", "strip_text": true},
                     {"name": "b"},
                     {"name": "c", "path": "ckpt", "strip_text": false}]})",
      "/base");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->models[0].strip_text, std::optional<bool>(true));
  EXPECT_FALSE(ok->models[1].strip_text.has_value());  // the flag's
  EXPECT_EQ(ok->models[2].strip_text, std::optional<bool>(false));
  for (const char* bad :
       {R"({"models": [{"name": "a", "strip_text": "yes"}]})",
        R"({"models": [{"name": "a", "path": "p", "strip_text": 1}]})"}) {
    auto r = ParseRepository(bad, "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(r.status().message()).find("strip_text must be"),
              std::string::npos)
        << r.status();
  }
}

TEST(Repository, RerankTemplateByNameOrObject) {
  auto ok = ParseRepository(
      R"({"models": [{"name": "a", "path": "p",
                      "rerank_template": "qwen3-reranker"},
                     {"name": "b", "path": "p",
                      "rerank_template": {"base": "qwen3-reranker",
                                          "instruction": "Find code"}},
                     {"name": "c", "path": "p",
                      "rerank_template": {"body": "{query} / {document}"}},
                     {"name": "d", "path": "p"}]})",
      "/base");
  ASSERT_TRUE(ok.ok()) << ok.status();
  const auto& m = ok->models;
  ASSERT_TRUE(m[0].rerank_template.has_value());
  EXPECT_EQ(m[0].rerank_template->name, "qwen3-reranker");
  EXPECT_EQ(m[0].rerank_template->yes, "yes");
  EXPECT_EQ(m[0].rerank_template->no, "no");
  // A built-in base with one field replaced keeps the rest.
  ASSERT_TRUE(m[1].rerank_template.has_value());
  EXPECT_EQ(m[1].rerank_template->name, "custom");
  EXPECT_EQ(m[1].rerank_template->instruction, "Find code");
  EXPECT_EQ(m[1].rerank_template->prefix, m[0].rerank_template->prefix);
  EXPECT_EQ(m[1].rerank_template->yes, "yes");
  ASSERT_TRUE(m[2].rerank_template.has_value());
  EXPECT_EQ(m[2].rerank_template->prefix, "");
  EXPECT_EQ(m[2].rerank_template->yes, "");
  EXPECT_FALSE(m[3].rerank_template.has_value());
  for (const char* bad : {
           R"({"models": [{"name": "x", "path": "p",
                           "rerank_template": "qwen9"}]})",
           R"({"models": [{"name": "x", "path": "p",
                           "rerank_template": {"body": "{query} only"}}]})",
           R"({"models": [{"name": "x", "path": "p",
                           "rerank_template": {"body": "{query}{document}",
                                               "yes": "y"}}]})",
           R"({"models": [{"name": "x", "path": "p",
                           "rerank_template": {"body": "{query}{document}",
                                               "answer": "y"}}]})",
           R"({"models": [{"name": "x", "path": "p",
                           "rerank_template": 3}]})"}) {
    auto r = ParseRepository(bad, "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(r.status().message()).find("rerank"),
              std::string::npos)
        << r.status();
  }
}

TEST(Repository, RopeScalingPerCheckpoint) {
  auto ok = ParseRepository(
      R"({"models": [{"name": "c", "path": "ckpt",
                      "rope_scaling": {"rope_type": "yarn", "factor": 4}},
                     {"name": "d", "path": "ckpt"}]})",
      "/base");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(nlohmann::json::parse(ok->models[0].rope_scaling),
            nlohmann::json::parse(R"({"rope_type": "yarn", "factor": 4})"));
  EXPECT_EQ(ok->models[1].rope_scaling, "");  // the checkpoint's
  auto bad = ParseRepository(
      R"({"models": [{"name": "c", "path": "p", "rope_scaling": "yarn"}]})",
      "");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("rope_scaling must be"),
            std::string::npos)
      << bad.status();
  // A native model has no checkpoint config to override.
  auto native = ParseRepository(
      R"({"models": [{"name": "n", "rope_scaling": {"rope_type": "yarn"}}]})",
      "");
  EXPECT_NE(std::string(native.status().message())
                .find("unknown key \"rope_scaling\""),
            std::string::npos)
      << native.status();
}

TEST(Repository, PromptsPerModel) {
  auto ok = ParseRepository(
      R"({"models": [{"name": "a", "prompts": {"query": "q: "},
                      "default_prompt_name": "query"},
                     {"name": "b"},
                     {"name": "c", "path": "ckpt", "prompts": {}}]})",
      "/base");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->models[0].prompts.at("query"), "q: ");
  EXPECT_EQ(ok->models[0].default_prompt_name, "query");
  EXPECT_FALSE(ok->models[1].prompts_set);
  EXPECT_TRUE(ok->models[2].prompts_set);  // replaces the checkpoint's
  EXPECT_TRUE(ok->models[2].prompts.empty());
  for (const char* bad :
       {R"({"models": [{"name": "a", "prompts": ["q: "]}]})",
        R"({"models": [{"name": "a", "prompts": {"q": 1}}]})",
        R"({"models": [{"name": "a", "default_prompt_name": "q"}]})",
        R"({"models": [{"name": "a", "prompts": {"q": "q: "},
                        "default_prompt_name": "p"}]})"}) {
    auto r = ParseRepository(bad, "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(r.status().message()).find("prompt"),
              std::string::npos)
        << r.status();
  }
}

}  // namespace
}  // namespace encoder::model

// Hugging Face checkpoint loading: what a good checkpoint yields, and the
// error of every kind of bad one (each written here as a small directory).
#include "server/model/hf/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/model/weights/model_repository.h"
#include "server/model/weights/safetensors.h"
#include "server/model/weights/weight_source.h"

namespace encoder::model {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr int64_t kVocab = 50, kHidden = 8, kHeads = 2, kInter = 16,
                  kPositions = 16;

std::string TempDir() {
  std::string pattern = (fs::temp_directory_path() / "hfckptXXXXXX").string();
  return mkdtemp(pattern.data());
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

void WriteTensors(const std::string& path,
                  const std::map<std::string, at::Tensor>& tensors) {
  auto bytes = SerializeSafetensors(tensors);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  WriteText(path, *bytes);
}

std::string BertConfig(int64_t heads = kHeads) {
  return absl::StrCat(
      R"({"model_type": "bert", "vocab_size": )", kVocab,
      R"(, "hidden_size": )", kHidden, R"(, "num_attention_heads": )", heads,
      R"(, "num_hidden_layers": 1, "intermediate_size": )", kInter,
      R"(, "max_position_embeddings": )", kPositions,
      R"(, "type_vocab_size": 2, "hidden_act": "gelu", "layer_norm_eps": 1e-12})");
}

// bert-base-uncased's tensor names (one layer), with the MLM head.
std::map<std::string, at::Tensor> BertTensors(const std::string& prefix) {
  std::map<std::string, at::Tensor> t;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    t[prefix + name] = at::randn(shape);
  };
  add("embeddings.word_embeddings.weight", {kVocab, kHidden});
  add("embeddings.position_embeddings.weight", {kPositions, kHidden});
  add("embeddings.token_type_embeddings.weight", {2, kHidden});
  add("embeddings.LayerNorm.weight", {kHidden});
  add("embeddings.LayerNorm.bias", {kHidden});
  const std::string l = "encoder.layer.0.";
  for (const char* m : {"attention.self.query", "attention.self.key",
                        "attention.self.value", "attention.output.dense"}) {
    add(l + m + ".weight", {kHidden, kHidden});
    add(l + m + ".bias", {kHidden});
  }
  add(l + "attention.output.LayerNorm.weight", {kHidden});
  add(l + "attention.output.LayerNorm.bias", {kHidden});
  add(l + "intermediate.dense.weight", {kInter, kHidden});
  add(l + "intermediate.dense.bias", {kInter});
  add(l + "output.dense.weight", {kHidden, kInter});
  add(l + "output.dense.bias", {kHidden});
  add(l + "output.LayerNorm.weight", {kHidden});
  add(l + "output.LayerNorm.bias", {kHidden});
  add("pooler.dense.weight", {kHidden, kHidden});
  add("pooler.dense.bias", {kHidden});
  t["cls.predictions.bias"] = at::randn({kVocab});
  return t;
}

class HfCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = TempDir(); }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::map<std::string, at::Tensor>& tensors,
             const std::string& config = BertConfig()) {
    WriteText(dir_ + "/config.json", config);
    WriteTensors(dir_ + "/model.safetensors", tensors);
  }
  // A BERT sentence-transformers directory (prompts belong to one:
  // modules.json) with prompts "query" and "passage", "query" the default.
  void WritePromptedBert() {
    Write(BertTensors(""));
    WriteText(dir_ + "/modules.json",
              R"([{"idx": 0, "name": "0", "path": "",
                   "type": "sentence_transformers.models.Transformer"}])");
    WriteText(dir_ + "/config_sentence_transformers.json",
              R"({"prompts": {"query": "query: ", "passage": "passage: "},
                  "default_prompt_name": "query"})");
  }
  absl::StatusOr<LoadedCheckpoint> Load() {
    return LoadCheckpoint(dir_, {}, at::kCPU, at::kFloat);
  }
  // Loading `tensors` under `config` is INVALID_ARGUMENT, `want` in its
  // message.
  void ExpectRefused(const std::map<std::string, at::Tensor>& tensors,
                     const std::string& config, const std::string& want) {
    Write(tensors, config);
    auto loaded = Load();
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument)
        << config;
    EXPECT_THAT(loaded.status().message(), HasSubstr(want)) << config;
  }

  std::string dir_;
};

TEST_F(HfCheckpointTest, BertWithPrefixAndHeadsLoads) {
  Write(BertTensors("bert."));
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->family, "bert");
  EXPECT_EQ(loaded->config.positional.type, SchemeType::kLearned);
  EXPECT_EQ(loaded->config.max_length(), kPositions);
  EXPECT_EQ(loaded->config.pooling, Pooling::kMean);  // documented default
  EXPECT_FALSE(loaded->config.normalize);
  // Encoder tensors only: pooler and MLM head are not counted.
  const int64_t h = kHidden;
  const int64_t expected = kVocab * h + kPositions * h + 2 * h + 2 * h +
                           4 * (h * h + h) + 2 * h + kInter * h + kInter +
                           h * kInter + h + 2 * h;
  EXPECT_EQ(loaded->encoder->parameter_count(), expected);
}

TEST_F(HfCheckpointTest, UnknownModelTypeListsSupported) {
  Write(BertTensors(""), R"({"model_type": "gpt2"})");
  auto loaded = Load();
  ASSERT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      loaded.status().message(),
      AllOf(HasSubstr("\"gpt2\""), HasSubstr("bert"), HasSubstr("modernbert"),
            HasSubstr("t5"), HasSubstr("marian")));
}

TEST_F(HfCheckpointTest, MissingTensorIsNamedWithItsShape) {
  auto tensors = BertTensors("");
  tensors.erase("encoder.layer.0.attention.self.key.weight");
  Write(tensors);
  auto loaded = Load();
  ASSERT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("missing tensor \"encoder.layer.0.attention.self.key."
                        "weight\" (expected shape [8, 8])"));
}

TEST_F(HfCheckpointTest, MisShapedTensorNamesBothShapes) {
  auto tensors = BertTensors("");
  tensors["encoder.layer.0.intermediate.dense.weight"] =
      at::randn({kInter + 1, kHidden});
  Write(tensors);
  auto loaded = Load();
  ASSERT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("\"encoder.layer.0.intermediate.dense.weight\" has "
                        "shape [17, 8], but config.json implies [16, 8]"));
}

TEST_F(HfCheckpointTest, UnexpectedTensorIsNamed) {
  auto tensors = BertTensors("");
  tensors["encoder.layer.1.output.dense.weight"] = at::randn({2, 2});
  Write(tensors);
  auto loaded = Load();
  ASSERT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("unexpected tensor \"encoder.layer.1.output.dense."
                        "weight\" [2, 2] for a bert encoder"));
}

TEST_F(HfCheckpointTest, InconsistentConfigIsReported) {
  Write(BertTensors(""), BertConfig(/*heads=*/3));  // 8 wide, 3 heads
  auto loaded = Load();
  ASSERT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(),
              AllOf(HasSubstr("inconsistent"), HasSubstr("num_heads 3")));
}

TEST_F(HfCheckpointTest, MissingConfigAndWeightsAreNotFound) {
  auto loaded = Load();
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(loaded.status().message(), HasSubstr("config.json"));
  WriteText(dir_ + "/config.json", BertConfig());
  loaded = Load();
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(loaded.status().message(), HasSubstr("model.safetensors"));
}

TEST_F(HfCheckpointTest, ShardedCheckpointLoadsAndMissingShardIsNamed) {
  auto tensors = BertTensors("bert.");
  std::map<std::string, at::Tensor> first, second;
  std::string map;
  int i = 0;
  for (const auto& [name, t] : tensors) {
    const bool one = i++ % 2 == 0;
    (one ? first : second)[name] = t;
    absl::StrAppend(&map, map.empty() ? "" : ", ", "\"", name, "\": \"",
                    one ? "model-00001-of-00002.safetensors"
                        : "model-00002-of-00002.safetensors",
                    "\"");
  }
  WriteText(dir_ + "/config.json", BertConfig());
  WriteText(dir_ + "/model.safetensors.index.json",
            absl::StrCat(R"({"metadata": {}, "weight_map": {)", map, "}}"));
  WriteTensors(dir_ + "/model-00001-of-00002.safetensors", first);
  WriteTensors(dir_ + "/model-00002-of-00002.safetensors", second);
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  fs::remove(dir_ + "/model-00002-of-00002.safetensors");
  loaded = Load();
  ASSERT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("missing shard model-00002-of-00002.safetensors"));
}

TEST_F(HfCheckpointTest, HalfPrecisionIsConvertedExactly) {
  auto tensors = BertTensors("");
  const at::Tensor word = tensors["embeddings.word_embeddings.weight"];
  for (auto& [name, t] : tensors) t = t.to(at::kBFloat16);
  Write(tensors);
  auto source = WeightSource::Open(dir_);
  ASSERT_TRUE(source.ok()) << source.status();
  auto loaded =
      (*source)->Load("embeddings.word_embeddings.weight", at::kFloat);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->scalar_type(), at::kFloat);
  // bf16 values are exactly representable in float32.
  EXPECT_TRUE(at::equal(*loaded, word.to(at::kBFloat16).to(at::kFloat)));
  EXPECT_FALSE(at::equal(*loaded, word));  // it really was rounded
  EXPECT_TRUE(Load().ok());
}

TEST_F(HfCheckpointTest, SentenceTransformersPoolingAndLength) {
  Write(BertTensors(""));
  WriteText(dir_ + "/modules.json",
            R"([{"idx": 0, "name": "0", "path": "",
                 "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling",
                 "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize",
                 "type": "sentence_transformers.models.Normalize"}])");
  fs::create_directory(dir_ + "/1_Pooling");
  WriteText(dir_ + "/1_Pooling/config.json",
            R"({"word_embedding_dimension": 8, "pooling_mode_cls_token": true,
                "pooling_mode_mean_tokens": false})");
  WriteText(dir_ + "/sentence_bert_config.json", R"({"max_seq_length": 10})");
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->config.pooling, Pooling::kFirst);
  EXPECT_TRUE(loaded->config.normalize);
  EXPECT_EQ(loaded->config.max_length(), 10);
  // An explicit choice wins over the files.
  CheckpointOverrides choice;
  choice.pooling = Pooling::kMax;
  choice.normalize = false;
  auto overridden = LoadCheckpoint(dir_, choice, at::kCPU, at::kFloat);
  ASSERT_TRUE(overridden.ok()) << overridden.status();
  EXPECT_EQ(overridden->config.pooling, Pooling::kMax);
  EXPECT_FALSE(overridden->config.normalize);
}

// sentence-transformers' LayerNorm module: torch's LayerNorm (eps 1e-5) of
// the pooled vector with the module's gains and biases; a dimension or a
// tensor that does not fit is refused by name.
TEST_F(HfCheckpointTest, SentenceTransformersLayerNorm) {
  Write(BertTensors(""));
  fs::create_directories(dir_ + "/1_Pooling");
  WriteText(dir_ + "/1_Pooling/config.json", R"({"pooling_mode": "mean"})");
  WriteText(dir_ + "/modules.json",
            R"([{"idx": 0, "name": "0", "path": "",
                 "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling",
                 "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_LayerNorm",
                 "type": "sentence_transformers.models.LayerNorm"}])");
  fs::create_directories(dir_ + "/2_LayerNorm");
  const at::Tensor gain = at::randn({kHidden}), shift = at::randn({kHidden});
  WriteText(dir_ + "/2_LayerNorm/config.json",
            absl::StrCat(R"({"dimension": )", kHidden, "}"));
  WriteTensors(dir_ + "/2_LayerNorm/model.safetensors",
               {{"norm.weight", gain}, {"norm.bias", shift}});
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->encoder->output_dim(), kHidden);
  const at::Tensor pooled = at::randn({3, kHidden});
  EXPECT_TRUE(
      at::equal(loaded->encoder->ProjectPooled(pooled),
                at::layer_norm(pooled, {kHidden}, gain, shift, /*eps=*/1e-5)));

  WriteText(dir_ + "/2_LayerNorm/config.json", R"({"dimension": 5})");
  EXPECT_THAT(Load().status().message(),
              HasSubstr("dimension 5 does not follow a 8-wide input"));
  WriteText(dir_ + "/2_LayerNorm/config.json",
            absl::StrCat(R"({"dimension": )", kHidden, "}"));
  WriteTensors(dir_ + "/2_LayerNorm/model.safetensors",
               {{"norm.weight", gain}});
  EXPECT_THAT(Load().status().message(),
              HasSubstr("tensor \"norm.bias\" must exist with shape [8]"));
}

TEST_F(HfCheckpointTest, SentenceTransformersPrompts) {
  WritePromptedBert();
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->prompts,
            (std::map<std::string, std::string>{{"query", "query: "},
                                                {"passage", "passage: "}}));
  EXPECT_EQ(loaded->default_prompt_name, "query");
  EXPECT_TRUE(loaded->include_prompt);

  // A default that names no prompt is an error naming the file.
  WriteText(dir_ + "/config_sentence_transformers.json",
            R"({"prompts": {"query": "query: "},
                "default_prompt_name": "search"})");
  auto bad = Load();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("config_sentence_transformers.json"),
            std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("\"search\""), std::string::npos);

  // sentence-transformers writes null for no default.
  WriteText(dir_ + "/config_sentence_transformers.json",
            R"({"prompts": {}, "default_prompt_name": null})");
  auto none = Load();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->prompts.empty());
  EXPECT_EQ(none->default_prompt_name, "");
}

// TEI's --default-prompt-name and --default-prompt reach a checkpoint's
// model through its spec and apply after its own prompts are read.
TEST_F(HfCheckpointTest, TeiDefaultPromptFlagsApplyOverTheCheckpointsPrompts) {
  WritePromptedBert();
  ModelSpec spec;
  spec.name = "m";
  spec.model_dir = dir_;
  spec.forced_default_prompt_name = "passage";
  ModelSpec resolved;
  auto named = LoadModel(spec, at::kCPU, at::kFloat, &resolved);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(resolved.default_prompt_name, "passage");
  EXPECT_EQ(resolved.prompts.size(), 2u);

  spec.forced_default_prompt_name = "search";
  auto unknown = LoadModel(spec, at::kCPU, at::kFloat, &resolved);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("--default-prompt-name \"search\" is not one of its "
                        "prompts (passage, query;"));

  spec.forced_default_prompt_name.reset();
  spec.forced_default_prompt = "Represent this: ";
  auto text = LoadModel(spec, at::kCPU, at::kFloat, &resolved);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(resolved.default_prompt_name, kForcedPromptName);
  EXPECT_EQ(resolved.prompts.at(kForcedPromptName), "Represent this: ");
  EXPECT_EQ(resolved.prompts.at("query"), "query: ");
}

// Qwen3 with transformers' tensor names under "model." (a causal-LM
// checkpoint, whose lm_head is not the encoder's): 4 query heads of 6 over
// 2 key/value heads, per-head q/k norms.
constexpr int64_t kQwenHeadDim = 6, kQwenKv = 2;

// head_dim 0: none in the config.
std::string QwenConfig(const std::string& type, const std::string& extra,
                       int64_t head_dim = kQwenHeadDim) {
  return absl::StrCat(
      R"({"model_type": ")", type, R"(", "vocab_size": )", kVocab,
      R"(, "hidden_size": )", kHidden,
      R"(, "num_attention_heads": 4, "num_key_value_heads": )", kQwenKv,
      head_dim > 0 ? absl::StrCat(R"(, "head_dim": )", head_dim)
                   : std::string(),
      R"(, "num_hidden_layers": 1, "intermediate_size": )", kInter,
      R"(, "max_position_embeddings": 64, )",
      R"("hidden_act": "silu", "rms_norm_eps": 1e-6)", extra, "}");
}

// Qwen2 with `qwen2_head_dim` wide heads (0: hidden / heads).
// `qk_norm` false: Qwen3's shapes without its q/k norms (Llama, Mistral).
std::map<std::string, at::Tensor> QwenTensors(bool qwen3,
                                              int64_t qwen2_head_dim = 0,
                                              bool qk_norm = true) {
  const int64_t qwen2_width = qwen2_head_dim > 0 ? qwen2_head_dim : kHidden / 4;
  const int64_t q = 4 * (qwen3 ? kQwenHeadDim : qwen2_width);
  const int64_t kv = kQwenKv * (qwen3 ? kQwenHeadDim : qwen2_width);
  std::map<std::string, at::Tensor> t;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    t["model." + name] = at::randn(shape);
  };
  add("embed_tokens.weight", {kVocab, kHidden});
  const std::string l = "layers.0.";
  add(l + "input_layernorm.weight", {kHidden});
  add(l + "self_attn.q_proj.weight", {q, kHidden});
  add(l + "self_attn.k_proj.weight", {kv, kHidden});
  add(l + "self_attn.v_proj.weight", {kv, kHidden});
  add(l + "self_attn.o_proj.weight", {kHidden, q});
  if (qwen3 && qk_norm) {
    add(l + "self_attn.q_norm.weight", {kQwenHeadDim});
    add(l + "self_attn.k_norm.weight", {kQwenHeadDim});
  } else if (!qwen3) {
    add(l + "self_attn.q_proj.bias", {q});
    add(l + "self_attn.k_proj.bias", {kv});
    add(l + "self_attn.v_proj.bias", {kv});
  }
  add(l + "post_attention_layernorm.weight", {kHidden});
  add(l + "mlp.gate_proj.weight", {kInter, kHidden});
  add(l + "mlp.up_proj.weight", {kInter, kHidden});
  add(l + "mlp.down_proj.weight", {kHidden, kInter});
  add("norm.weight", {kHidden});
  t["lm_head.weight"] = at::randn({kVocab, kHidden});
  return t;
}

TEST_F(HfCheckpointTest, Qwen3LoadsAsACausalGroupedQueryEmbedder) {
  Write(QwenTensors(true),
        QwenConfig("qwen3", R"(, "rope_parameters": {"rope_type": "default",)"
                            R"( "rope_theta": 1000000.0})"));
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const ModelConfig& c = loaded->config;
  EXPECT_EQ(loaded->family, "qwen3");
  EXPECT_TRUE(c.arch.causal);
  EXPECT_TRUE(c.arch.qk_norm);
  EXPECT_EQ(c.kv_heads(), kQwenKv);
  EXPECT_EQ(c.head_dim(), kQwenHeadDim);
  EXPECT_EQ(c.positional.type, SchemeType::kRope);
  EXPECT_EQ(c.positional.base, 1e6);
  EXPECT_EQ(c.pooling, Pooling::kLastToken);  // no sentence-transformers files
  EXPECT_EQ(c.max_length(), 64);
  const int64_t h = kHidden, q = 4 * kQwenHeadDim, kv = kQwenKv * kQwenHeadDim;
  EXPECT_EQ(loaded->encoder->parameter_count(),
            kVocab * h + h + (q + 2 * kv) * h + h * q + 2 * kQwenHeadDim + h +
                3 * kInter * h + h);
}

TEST_F(HfCheckpointTest, Qwen2BiasesQueriesKeysAndValuesOnly) {
  auto tensors = QwenTensors(false);
  Write(tensors, QwenConfig("qwen2", R"(, "rope_theta": 50000.0)", 0));
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->family, "qwen2");
  EXPECT_FALSE(loaded->config.arch.qk_norm);
  EXPECT_EQ(loaded->config.positional.base, 50000.0);
  EXPECT_EQ(loaded->config.head_dim(), kHidden / 4);  // hidden / heads
  // Qwen2Attention reads getattr(config, "head_dim", hidden / heads).
  Write(QwenTensors(false, kQwenHeadDim), QwenConfig("qwen2", ""));
  auto wide = Load();
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(wide->config.head_dim(), kQwenHeadDim);
  tensors["model.layers.0.self_attn.o_proj.bias"] = at::randn({kHidden});
  Write(tensors, QwenConfig("qwen2", "", 0));
  EXPECT_THAT(Load().status().message(),
              HasSubstr("unexpected tensor \"model.layers.0.self_attn.o_proj"
                        ".bias\""));
}

// Sliding windows as transformers' configs place them: Qwen's from
// max_window_layers on or by layer_types, only with use_sliding_window;
// Mistral's on every layer unless null (4096 when absent). A causal
// window of w keys is stored as |i - j| <= w - 1; none when no layer
// slides.
TEST_F(HfCheckpointTest, DecodersReadTheirSlidingWindows) {
  struct Case {
    std::string type, extra;
    std::vector<int64_t> windows;
  };
  const Case cases[] = {
      {"qwen3",
       R"(, "use_sliding_window": true, "sliding_window": 5,
           "max_window_layers": 0)",
       {4}},
      {"qwen3", R"(, "use_sliding_window": true, "sliding_window": 5)", {}},
      {"qwen3",
       R"(, "use_sliding_window": false, "sliding_window": 5,
           "max_window_layers": 0)",
       {}},
      {"qwen3",
       R"(, "use_sliding_window": true, "sliding_window": 7,
           "layer_types": ["sliding_attention"])",
       {6}},
      {"qwen3", R"(, "layer_types": ["full_attention"])", {}},
      {"mistral", "", {4095}},
      {"mistral", R"(, "sliding_window": null)", {}},
      {"mistral", R"(, "sliding_window": 9)", {8}},
  };
  for (const Case& c : cases) {
    Write(QwenTensors(true, 0, /*qk_norm=*/c.type == "qwen3"),
          QwenConfig(c.type, c.extra));
    auto loaded = Load();
    ASSERT_TRUE(loaded.ok()) << c.type << c.extra << ": " << loaded.status();
    EXPECT_EQ(loaded->family, c.type);
    EXPECT_EQ(loaded->config.arch.layer_window, c.windows) << c.type << c.extra;
  }
}

// Gemma 3 refuses what it would not compute as transformers does (the
// numbers are checked against transformers by the conformance suite).
TEST_F(HfCheckpointTest, Gemma3RefusesWhatItDoesNotServe) {
  const std::pair<std::string, std::string> cases[] = {
      {R"(, "attn_logit_softcapping": 50.0)", "attn_logit_softcapping"},
      {R"(, "sliding_window": null, "layer_types": ["sliding_attention"])",
       "sliding_attention layers but sliding_window is null"},
      {R"(, "layer_types": ["local"])", "layer_types has \"local\""},
      {R"(, "rope_parameters": {"full_attention": {"rope_type": "su"}})",
       "type \"su\" is not supported"},
      {R"(, "rope_parameters": {"global": {"rope_type": "default"}})",
       "per layer type: full_attention and sliding_attention"},
  };
  for (const auto& [extra, want] : cases) {
    ExpectRefused(QwenTensors(true), QwenConfig("gemma3_text", extra), want);
  }
}

// Llama: attention_bias biases q, k, v and the output, mlp_bias the gate,
// up and down projections; both off by default, like Mistral's.
TEST_F(HfCheckpointTest, LlamaBiasesFollowItsConfig) {
  auto tensors = QwenTensors(true, 0, /*qk_norm=*/false);
  Write(tensors, QwenConfig("llama", ""));
  auto plain = Load();
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->family, "llama");
  EXPECT_FALSE(plain->config.arch.attention_bias);
  EXPECT_FALSE(plain->config.arch.ffn_in_bias);
  EXPECT_TRUE(plain->config.arch.layer_window.empty());
  const std::string l = "model.layers.0.";
  const int64_t q = 4 * kQwenHeadDim, kv = kQwenKv * kQwenHeadDim;
  for (const auto& [name, size] : std::vector<std::pair<std::string, int64_t>>{
           {"self_attn.q_proj.bias", q},
           {"self_attn.k_proj.bias", kv},
           {"self_attn.v_proj.bias", kv},
           {"self_attn.o_proj.bias", kHidden},
           {"mlp.gate_proj.bias", kInter},
           {"mlp.up_proj.bias", kInter},
           {"mlp.down_proj.bias", kHidden}}) {
    tensors[l + name] = at::randn({size});
  }
  Write(tensors,
        QwenConfig("llama", R"(, "attention_bias": true, "mlp_bias": true)"));
  auto biased = Load();
  ASSERT_TRUE(biased.ok()) << biased.status();
  const int64_t h = kHidden;
  EXPECT_EQ(
      biased->encoder->parameter_count() - plain->encoder->parameter_count(),
      q + 2 * kv + h + 2 * kInter + h);
  // Without mlp_bias the feed-forward biases are not the model's.
  Write(tensors, QwenConfig("llama", R"(, "attention_bias": true)"));
  EXPECT_THAT(Load().status().message(),
              HasSubstr("unexpected tensor \"model.layers.0.mlp."));
}

// A rope_scaling override (a repository entry's, --rope-scaling) replaces
// config.json's scaling at load and keeps its base; the description says
// it was overridden. Families without a rotary scaling in config.json and
// malformed overrides are refused by name.
TEST_F(HfCheckpointTest, RopeScalingOverrideReplacesTheCheckpoints) {
  Write(QwenTensors(true), QwenConfig("qwen3", R"(, "rope_theta": 5000.0,
            "original_max_position_embeddings": 16,
            "rope_scaling": {"type": "linear", "factor": 2.0})"));
  CheckpointOverrides o;
  o.rope_scaling = R"({"rope_type": "yarn", "factor": 8})";
  auto yarn = LoadCheckpoint(dir_, o, at::kCPU, at::kFloat);
  ASSERT_TRUE(yarn.ok()) << yarn.status();
  const RopeScaling& s = yarn->config.positional.rope_scaling;
  EXPECT_EQ(s.type, RopeScalingType::kYarn);
  EXPECT_EQ(s.factor, 8.0);
  EXPECT_EQ(s.original_max_positions, 16);  // the checkpoint's
  EXPECT_EQ(yarn->config.positional.base, 5000.0);
  EXPECT_TRUE(s.overridden);
  o.rope_scaling = R"({"type": "default"})";
  auto plain = LoadCheckpoint(dir_, o, at::kCPU, at::kFloat);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->config.positional.rope_scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(plain->config.positional.base, 5000.0);
  auto own = LoadCheckpoint(dir_, {}, at::kCPU, at::kFloat);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->config.positional.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_FALSE(own->config.positional.rope_scaling.overridden);
  for (const auto& [scaling, want] :
       std::vector<std::pair<std::string, std::string>>{
           {"[1]", "is not a JSON object"},
           {R"({"factor": 2})", "needs a \"rope_type\""},
           {R"({"rope_type": "ntk"})", "type \"ntk\" is not supported"}}) {
    o.rope_scaling = scaling;
    auto refused = LoadCheckpoint(dir_, o, at::kCPU, at::kFloat);
    EXPECT_THAT(refused.status().message(), HasSubstr(want)) << scaling;
  }
  Write(BertTensors("bert."));
  o.rope_scaling = R"({"rope_type": "linear", "factor": 2})";
  EXPECT_THAT(LoadCheckpoint(dir_, o, at::kCPU, at::kFloat).status().message(),
              HasSubstr("model_type is \"bert\""));
}

TEST_F(HfCheckpointTest, QwenReadsTheLengthIndependentRopeScalings) {
  // The keys as transformers' rope initialization reads them (the
  // numbers themselves are checked against transformers' forward by the
  // conformance suite); yarn's attention factor by its formula.
  struct Case {
    std::string extra;
    RopeScalingType type;
    double factor, attention_factor;
    int64_t original;
  };
  const double mscale = 0.1 * std::log(4.0) + 1.0;
  const Case cases[] = {
      {R"(, "rope_scaling": {"type": "linear", "factor": 2.5})",
       RopeScalingType::kLinear, 2.5, 1.0, 64},
      {R"(, "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4,
           "factor": 4, "original_max_position_embeddings": 16})",
       RopeScalingType::kYarn, 4.0, mscale, 16},
      // A top-level original context wins (transformers 5); the factor
      // defaults to max_position_embeddings / original.
      {R"(, "original_max_position_embeddings": 16,
           "rope_scaling": {"rope_type": "yarn",
                            "original_max_position_embeddings": 32})",
       RopeScalingType::kYarn, 4.0, mscale, 16},
      {R"(, "rope_scaling": {"type": "yarn", "factor": 4,
           "attention_factor": 1.25, "beta_fast": 0})",
       RopeScalingType::kYarn, 4.0, 1.25, 64},
      {R"(, "rope_parameters": {"rope_type": "llama3", "factor": 8,
           "low_freq_factor": 1, "high_freq_factor": 4,
           "original_max_position_embeddings": 32})",
       RopeScalingType::kLlama3, 8.0, 1.0, 32},
      // dynamic grows past max_position_embeddings and reads no original
      // context.
      {R"(, "rope_scaling": {"type": "dynamic", "factor": 4.0,
           "original_max_position_embeddings": 16})",
       RopeScalingType::kDynamic, 4.0, 1.0, 64},
      // longrope: the factor defaults to max_position_embeddings /
      // original, the attention factor to sqrt(1 + ln 4 / ln 16).
      {R"(, "rope_parameters": {"rope_type": "longrope",
           "original_max_position_embeddings": 16,
           "short_factor": [1, 1, 1],
           "long_factor": [1, 2, 3]})",
       RopeScalingType::kLongrope, 4.0,
       std::sqrt(1 + std::log(4.0) / std::log(16.0)), 16},
      {R"(, "rope_parameters": {"rope_type": "longrope", "factor": 2,
           "attention_factor": 1.5, "short_factor": [1, 1, 1],
           "long_factor": [1, 2, 3]})",
       RopeScalingType::kLongrope, 2.0, 1.5, 64},
      {R"(, "rope_parameters": {"rope_type": "proportional"})",
       RopeScalingType::kProportional, 1.0, 1.0, 64},
  };
  for (const Case& c : cases) {
    Write(QwenTensors(true), QwenConfig("qwen3", c.extra));
    auto loaded = Load();
    ASSERT_TRUE(loaded.ok()) << c.extra << ": " << loaded.status();
    const RopeScaling& s = loaded->config.positional.rope_scaling;
    EXPECT_EQ(s.type, c.type) << c.extra;
    EXPECT_DOUBLE_EQ(s.factor, c.factor) << c.extra;
    EXPECT_DOUBLE_EQ(s.attention_factor, c.attention_factor) << c.extra;
    EXPECT_EQ(s.original_max_positions, c.original) << c.extra;
    if (c.type == RopeScalingType::kYarn) {
      EXPECT_EQ(s.beta_fast, 32.0) << c.extra;  // 0 and absent: 32
      EXPECT_EQ(s.beta_slow, 1.0) << c.extra;
    }
  }
}

TEST_F(HfCheckpointTest, QwenRefusesWhatItDoesNotServe) {
  const std::pair<std::string, std::string> cases[] = {
      {R"(, "layer_types": ["sliding_attention"])",
       "\"sliding_attention\" but no sliding_window"},
      {R"(, "use_sliding_window": true, "sliding_window": 0,
           "max_window_layers": 0)",
       "sliding_window 0 must be a positive integer or null"},
      {R"(, "use_sliding_window": true, "sliding_window": 1,
           "max_window_layers": 0)",
       "sliding_window 1 (each token seeing only itself)"},
      {R"(, "layer_types": ["chunked_attention"])",
       "layer_types has \"chunked_attention\""},
      {R"(, "rope_scaling": {"type": "ntk-by-parts", "factor": 4.0})",
       "\"ntk-by-parts\" is not supported"},
      {R"(, "rope_scaling": {"type": "dynamic"})", "needs \"factor\""},
      {R"(, "rope_parameters": {"rope_type": "longrope", "short_factor": [1],
           "long_factor": [2]})",
       "need head_dim / 2 = 3 values each, got 1 and 1"},
      {R"(, "rope_parameters": {"rope_type": "longrope",
           "short_factor": [1, 1, 0], "long_factor": [2]})",
       "\"short_factor\" must be a list of numbers above 0"},
      {R"(, "rope_parameters": {"rope_type": "longrope",
           "short_factor": [1, 1, 1]})",
       "needs \"long_factor\""},
      {R"(, "rope_parameters": {"rope_type": "linear"})", "needs \"factor\""},
      {R"(, "rope_scaling": {"type": "linear", "factor": 0})",
       "factor 0 must be above 0"},
      {R"(, "rope_scaling": {"type": "llama3", "factor": 8,
           "low_freq_factor": 4, "high_freq_factor": 1})",
       "0 < low_freq_factor < high_freq_factor"},
      {R"(, "partial_rotary_factor": 0.5,
           "rope_scaling": {"type": "linear", "factor": 2})",
       "partial_rotary_factor 0.5"},
      {R"(, "rope_parameters": {"rope_type": "yarn", "factor": 2},
           "rope_scaling": {"type": "linear", "factor": 2})",
       "two rotary types"},
  };
  for (const auto& [extra, want] : cases) {
    ExpectRefused(QwenTensors(true), QwenConfig("qwen3", extra), want);
  }
  // 4 query heads cannot share 3 key/value heads.
  std::string config = QwenConfig("qwen3", "");
  const std::string two = "\"num_key_value_heads\": 2";
  config.replace(config.find(two), two.size(), "\"num_key_value_heads\": 3");
  Write(QwenTensors(true), config);
  EXPECT_THAT(Load().status().message(),
              HasSubstr("num_key_value_heads 3 must divide"));
}

// DeBERTa-v2 with transformers' names under "deberta." (a masked-LM
// checkpoint): both position terms from their own projections, distances
// clamped at 6 (span 6, a [12, D] table), no norm on it, no input table.
std::string DebertaConfig(const std::string& extra) {
  return absl::StrCat(
      R"({"model_type": "deberta-v2", "vocab_size": )", kVocab,
      R"(, "hidden_size": )", kHidden, R"(, "num_attention_heads": )", kHeads,
      R"(, "num_hidden_layers": 1, "intermediate_size": )", kInter,
      R"(, "max_position_embeddings": )", kPositions,
      R"(, "relative_attention": true, "position_biased_input": false, )",
      R"("pos_att_type": "p2c|c2p", "max_relative_positions": 6, )",
      R"("position_buckets": -1, "share_att_key": false, )",
      R"("type_vocab_size": 0)", extra, "}");
}

std::map<std::string, at::Tensor> DebertaTensors() {
  std::map<std::string, at::Tensor> t;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    t["deberta." + name] = at::randn(shape);
  };
  add("embeddings.word_embeddings.weight", {kVocab, kHidden});
  add("embeddings.LayerNorm.weight", {kHidden});
  add("embeddings.LayerNorm.bias", {kHidden});
  const std::string l = "encoder.layer.0.";
  for (const char* m :
       {"attention.self.query_proj", "attention.self.key_proj",
        "attention.self.value_proj", "attention.self.pos_key_proj",
        "attention.self.pos_query_proj", "attention.output.dense"}) {
    add(l + m + ".weight", {kHidden, kHidden});
    add(l + m + ".bias", {kHidden});
  }
  for (const char* n : {"attention.output.LayerNorm", "output.LayerNorm"}) {
    add(l + n + ".weight", {kHidden});
    add(l + n + ".bias", {kHidden});
  }
  add(l + "intermediate.dense.weight", {kInter, kHidden});
  add(l + "intermediate.dense.bias", {kInter});
  add(l + "output.dense.weight", {kHidden, kInter});
  add(l + "output.dense.bias", {kHidden});
  add("encoder.rel_embeddings.weight", {12, kHidden});
  t["lm_predictions.lm_head.bias"] = at::randn({kVocab});
  return t;
}

TEST_F(HfCheckpointTest, DebertaV2LoadsAsDisentangledAttention) {
  Write(DebertaTensors(), DebertaConfig(""));
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const PositionalConfig& p = loaded->config.positional;
  EXPECT_EQ(loaded->family, "deberta-v2");
  EXPECT_EQ(p.type, SchemeType::kDisentangled);
  EXPECT_TRUE(p.c2p && p.p2c);  // from the string form
  EXPECT_FALSE(p.share_att_key || p.relative_norm || p.absolute_input);
  EXPECT_EQ(p.relative_span(), 6);
  EXPECT_EQ(loaded->config.score_scale_factor(), 3);
  EXPECT_FALSE(loaded->config.arch.token_type_embedding);
  // No input table: longer inputs run (the relative terms saturate).
  EXPECT_TRUE(loaded->encoder->scheme().Describe().extrapolates);
  const int64_t h = kHidden;
  EXPECT_EQ(loaded->encoder->parameter_count(),
            kVocab * h + 2 * h + 6 * (h * h + h) + 4 * h + kInter * h + kInter +
                h * kInter + h + 12 * h);
}

TEST_F(HfCheckpointTest, DebertaV2RefusesWhatItDoesNotServe) {
  const std::pair<std::string, std::string> cases[] = {
      {R"(, "conv_kernel_size": 3)", "conv_kernel_size"},
      {R"(, "embedding_size": 4)", "embedding_size"},
      {R"(, "relative_attention": false)", "relative_attention is false"},
      {R"(, "pos_att_type": ["c2p", "p2p"])", "\"p2p\""},
      {R"(, "norm_rel_ebd": "batch_norm")", "norm_rel_ebd"},
  };
  for (const auto& [extra, want] : cases) {
    // A repeated key: the later value stands (as Python's json reads it).
    ExpectRefused(DebertaTensors(), DebertaConfig(extra), want);
  }
}

// A BERT checkpoint with sentence-transformers' Transformer and Pooling
// modules; `pooling` is the Pooling module's config.json.
void WriteSentenceTransformers(const std::string& dir,
                               const std::string& pooling) {
  WriteText(dir + "/modules.json",
            R"([{"idx": 0, "name": "0", "path": "",
                 "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling",
                 "type": "sentence_transformers.models.Pooling"}])");
  fs::create_directories(dir + "/1_Pooling");
  WriteText(dir + "/1_Pooling/config.json", pooling);
}

// sentence-transformers 6.x writes "pooling_mode" (a name, or a list) and
// "embedding_dimension"; 5.x and older the pooling_mode_* booleans and
// "word_embedding_dimension". Both are read; none true means mean, as the
// library reads it.
TEST_F(HfCheckpointTest, SentenceTransformersPoolingModeSpellings) {
  Write(BertTensors(""));
  const std::pair<std::string, Pooling> cases[] = {
      {R"({"embedding_dimension": 8, "pooling_mode": "cls"})", Pooling::kFirst},
      {R"({"embedding_dimension": 8, "pooling_mode": "max"})", Pooling::kMax},
      {R"({"embedding_dimension": 8, "pooling_mode": "mean"})", Pooling::kMean},
      {R"({"embedding_dimension": 8, "pooling_mode": "mean_sqrt_len_tokens"})",
       Pooling::kMeanSqrtLen},
      {R"({"embedding_dimension": 8, "pooling_mode": "weightedmean"})",
       Pooling::kWeightedMean},
      {R"({"embedding_dimension": 8, "pooling_mode": ["lasttoken"]})",
       Pooling::kLastToken},
      {R"({"embedding_dimension": 8})", Pooling::kMean},
      {R"({"word_embedding_dimension": 8, "pooling_mode_max_tokens": true,
           "pooling_mode_mean_tokens": false})",
       Pooling::kMax},
      {R"({"word_embedding_dimension": 8,
           "pooling_mode_mean_sqrt_len_tokens": true})",
       Pooling::kMeanSqrtLen},
      {R"({"word_embedding_dimension": 8, "pooling_mode_cls_token": false,
           "pooling_mode_mean_tokens": false})",
       Pooling::kMean},
      // Both spellings, saying the same.
      {R"({"embedding_dimension": 8, "word_embedding_dimension": 8,
           "pooling_mode": "weightedmean",
           "pooling_mode_weightedmean_tokens": true})",
       Pooling::kWeightedMean},
  };
  for (const auto& [config, want] : cases) {
    WriteSentenceTransformers(dir_, config);
    auto loaded = Load();
    ASSERT_TRUE(loaded.ok()) << config << ": " << loaded.status();
    EXPECT_EQ(loaded->config.pooling, want) << config;
  }
}

TEST_F(HfCheckpointTest, SentenceTransformersPoolingRefusals) {
  Write(BertTensors(""));
  const std::pair<std::string, std::string> cases[] = {
      {R"({"embedding_dimension": 8, "pooling_mode": "median"})",
       "pooling_mode \"median\" is not one of"},
      {R"({"embedding_dimension": 8, "pooling_mode": ["mean", "max"]})",
       "mean + max concatenated are not supported"},
      {R"({"word_embedding_dimension": 8, "pooling_mode_mean_tokens": true,
           "pooling_mode_max_tokens": true})",
       "max + mean concatenated"},  // the library's order
      {R"({"embedding_dimension": 8, "pooling_mode": "cls",
           "pooling_mode_mean_tokens": true})",
       "contradicts the legacy pooling_mode_* keys (true: mean)"},
      {R"({"embedding_dimension": 8, "pooling_mode": 3})",
       "pooling_mode must be a mode name"},
      {R"({"embedding_dimension": 8, "pooling_mode": []})", "names no mode"},
      {R"({"embedding_dimension": 16, "pooling_mode": "mean"})",
       "embedding_dimension 16 differs from the model's hidden size 8"},
      {R"({"embedding_dimension": 8, "word_embedding_dimension": 16})",
       "word_embedding_dimension 16 differs"},
      {R"({"word_embedding_dimension": 8, "pooling_mode_cls_token": "yes"})",
       "pooling_mode_cls_token must be true or false"},
  };
  for (const auto& [config, want] : cases) {
    WriteSentenceTransformers(dir_, config);
    auto loaded = Load();
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument)
        << config;
    EXPECT_THAT(loaded.status().message(),
                AllOf(HasSubstr("1_Pooling/config.json"), HasSubstr(want)))
        << config;
  }
}

// The served length follows sentence-transformers: sentence_bert_config's
// max_seq_length (processor_kwargs' model_max_length first), else the
// tokenizer's model_max_length capped by the model's positions; the 1e30
// transformers writes for "unknown" leaves the model's.
TEST_F(HfCheckpointTest, LengthFromSentenceBertConfigOrTokenizerConfig) {
  Write(BertTensors(""));
  WriteSentenceTransformers(dir_, R"({"embedding_dimension": 8})");
  auto length = [&]() -> int64_t {
    auto loaded = Load();
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? loaded->config.max_length() : -1;
  };
  EXPECT_EQ(length(), kPositions);
  WriteText(dir_ + "/tokenizer_config.json", R"({"model_max_length": 12})");
  EXPECT_EQ(length(), 12);
  WriteText(dir_ + "/tokenizer_config.json",
            R"({"model_max_length": 1000000000000000019884624838656})");
  EXPECT_EQ(length(), kPositions);
  WriteText(dir_ + "/tokenizer_config.json", R"({"model_max_length": 1e30})");
  EXPECT_EQ(length(), kPositions);
  WriteText(dir_ + "/tokenizer_config.json", R"({"model_max_length": 100})");
  EXPECT_EQ(length(), kPositions);  // capped by the positions
  WriteText(dir_ + "/tokenizer_config.json", R"({"model_max_length": 12})");
  WriteText(dir_ + "/sentence_bert_config.json",
            R"({"max_seq_length": 14, "do_lower_case": false})");
  EXPECT_EQ(length(), 14);  // max_seq_length wins over the tokenizer's
  WriteText(dir_ + "/sentence_bert_config.json",
            R"({"max_seq_length": 14,
                "processor_kwargs": {"model_max_length": 9}})");
  EXPECT_EQ(length(), 9);
  WriteText(dir_ + "/sentence_bert_config.json", R"({"max_seq_length": null})");
  EXPECT_EQ(length(), 12);
  // A checkpoint without sentence-transformers files: the tokenizer's too.
  fs::remove(dir_ + "/modules.json");
  EXPECT_EQ(length(), 12);

  WriteText(dir_ + "/tokenizer_config.json", R"({"model_max_length": -5})");
  EXPECT_THAT(Load().status().message(),
              HasSubstr("tokenizer_config.json: model_max_length -5 is not a "
                        "positive integer"));
}

TEST_F(HfCheckpointTest, DoLowerCaseIsCarried) {
  Write(BertTensors(""));
  WriteSentenceTransformers(dir_, R"({"embedding_dimension": 8})");
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(loaded->lowercase);
  WriteText(dir_ + "/sentence_bert_config.json", R"({"do_lower_case": true})");
  loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->lowercase);
  // The older file names sentence-transformers still reads.
  fs::remove(dir_ + "/sentence_bert_config.json");
  WriteText(dir_ + "/sentence_roberta_config.json",
            R"({"do_lower_case": true, "max_seq_length": 11})");
  loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->lowercase);
  EXPECT_EQ(loaded->config.max_length(), 11);
  WriteText(dir_ + "/sentence_roberta_config.json",
            R"({"do_lower_case": "yes"})");
  EXPECT_THAT(Load().status().message(),
              HasSubstr("do_lower_case must be true or false"));
}

// Every ACT2FN name the families' hidden_act can give that the encoder
// computes, and an unknown one refused by name.
TEST_F(HfCheckpointTest, ActivationNames) {
  const std::pair<const char*, Activation> cases[] = {
      {"gelu", Activation::kGelu},
      {"relu", Activation::kRelu},
      {"gelu_new", Activation::kGeluNew},
      {"gelu_fast", Activation::kGeluFast},
      {"gelu_pytorch_tanh", Activation::kGeluTanh},
      {"quick_gelu", Activation::kQuickGelu},
      {"silu", Activation::kSilu},
      {"swish", Activation::kSilu},
      {"mish", Activation::kMish}};
  for (const auto& [name, want] : cases) {
    std::string config = BertConfig();
    const std::string gelu = R"("hidden_act": "gelu")";
    config.replace(config.find(gelu), gelu.size(),
                   absl::StrCat(R"("hidden_act": ")", name, "\""));
    Write(BertTensors(""), config);
    auto loaded = Load();
    ASSERT_TRUE(loaded.ok()) << name << ": " << loaded.status();
    EXPECT_EQ(loaded->config.activation, want) << name;
  }
  std::string config = BertConfig();
  const std::string gelu = R"("hidden_act": "gelu")";
  config.replace(config.find(gelu), gelu.size(), R"("hidden_act": "gelu_10")");
  Write(BertTensors(""), config);
  EXPECT_THAT(Load().status().message(),
              HasSubstr("activation \"gelu_10\" is not supported"));
}

std::string ModernBertConfig(const std::string& extra) {
  return absl::StrCat(R"({"model_type": "modernbert", "vocab_size": )", kVocab,
                      R"(, "hidden_size": )", kHidden,
                      R"(, "num_attention_heads": )", kHeads,
                      R"(, "num_hidden_layers": 3, "intermediate_size": )",
                      kInter, R"(, "max_position_embeddings": )", kPositions,
                      R"(, "local_attention": 4)", extra, "}");
}

// transformers' ModernBERT names, no prefix, 3 layers, no biases.
std::map<std::string, at::Tensor> ModernBertTensors() {
  std::map<std::string, at::Tensor> t;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    t[name] = at::randn(shape);
  };
  add("embeddings.tok_embeddings.weight", {kVocab, kHidden});
  add("embeddings.norm.weight", {kHidden});
  for (int i = 0; i < 3; ++i) {
    const std::string l = absl::StrCat("layers.", i, ".");
    if (i > 0) add(l + "attn_norm.weight", {kHidden});
    add(l + "attn.Wqkv.weight", {3 * kHidden, kHidden});
    add(l + "attn.Wo.weight", {kHidden, kHidden});
    add(l + "mlp_norm.weight", {kHidden});
    add(l + "mlp.Wi.weight", {2 * kInter, kHidden});
    add(l + "mlp.Wo.weight", {kHidden, kInter});
  }
  add("final_norm.weight", {kHidden});
  return t;
}

// The rotary bases in both spellings (transformers 5's rope_parameters per
// layer type wins over global_rope_theta / local_rope_theta), the layers'
// kinds from layer_types or global_attn_every_n_layers.
TEST_F(HfCheckpointTest, ModernBertRopeBasesAndLayerTypes) {
  auto bases = [&](const std::string& extra) {
    Write(ModernBertTensors(), ModernBertConfig(extra));
    auto loaded = Load();
    EXPECT_TRUE(loaded.ok()) << extra << ": " << loaded.status();
    return loaded.ok() ? loaded->config.arch.layer_rope_base
                       : std::vector<double>{};
  };
  EXPECT_EQ(bases(""), (std::vector<double>{160000, 10000, 10000}));
  EXPECT_EQ(bases(R"(, "global_rope_theta": 40000.0, "local_rope_theta": 5000,
                    "global_attn_every_n_layers": 2)"),
            (std::vector<double>{40000, 5000, 40000}));
  EXPECT_EQ(bases(R"(, "rope_parameters": {
                 "full_attention": {"rope_type": "default", "rope_theta": 40000},
                 "sliding_attention": {"rope_type": "default",
                                       "rope_theta": 5000}},
                 "layer_types": ["full_attention", "sliding_attention",
                                 "full_attention"])"),
            (std::vector<double>{40000, 5000, 40000}));
  // rope_parameters win; a layer type without a theta keeps the other key's.
  EXPECT_EQ(bases(R"(, "global_rope_theta": 1.0, "local_rope_theta": 7000,
                    "rope_parameters": {"full_attention": {"rope_theta": 2e4},
                                        "sliding_attention": {}},
                    "layer_types": ["sliding_attention", "full_attention",
                                    "sliding_attention"])"),
            (std::vector<double>{7000, 20000, 7000}));
  Write(ModernBertTensors(),
        ModernBertConfig(R"(, "layer_types": ["sliding_attention",
                                 "full_attention", "sliding_attention"])"));
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->config.arch.layer_window, (std::vector<int64_t>{2, 0, 2}));

  const std::pair<std::string, std::string> refused[] = {
      {R"(, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4})",
       "rope_parameters has \"rope_theta\""},
      {R"(, "layer_types": ["full_attention", "chunked_attention",
                            "full_attention"])",
       "layer_types has \"chunked_attention\""},
      {R"(, "layer_types": ["full_attention"])",
       "layer_types must list one type per layer (3)"},
  };
  for (const auto& [extra, want] : refused) {
    ExpectRefused(ModernBertTensors(), ModernBertConfig(extra), want);
  }
}

// A scaling per layer type (transformers 5's rope_parameters entries), or
// one rope_scaling for both types on their own bases (what 4.x reads and
// 5.x merges into both); both at once are refused. An override replaces
// both types' scalings and keeps their bases.
TEST_F(HfCheckpointTest, ModernBertRopeScalingPerLayerType) {
  auto load = [&](const std::string& extra, const CheckpointOverrides& o) {
    Write(ModernBertTensors(), ModernBertConfig(extra));
    return LoadCheckpoint(dir_, o, at::kCPU, at::kFloat);
  };
  auto types = [](const LoadedCheckpoint& c) {
    std::vector<RopeScalingType> out;
    for (const RopeScaling& s : c.config.arch.layer_rope_scaling) {
      out.push_back(s.type);
    }
    return out;
  };
  using T = RopeScalingType;
  auto per_type = load(R"(, "rope_parameters": {
      "full_attention": {"rope_type": "yarn", "rope_theta": 40000,
                         "factor": 4, "original_max_position_embeddings": 16},
      "sliding_attention": {"rope_type": "linear", "factor": 2.5,
                            "rope_theta": 5000}})",
                       {});
  ASSERT_TRUE(per_type.ok()) << per_type.status();
  EXPECT_EQ(types(*per_type),
            (std::vector<T>{T::kYarn, T::kLinear, T::kLinear}));
  EXPECT_EQ(per_type->config.arch.layer_rope_base,
            (std::vector<double>{40000, 5000, 5000}));
  const RopeScaling& yarn = per_type->config.arch.layer_rope_scaling[0];
  EXPECT_EQ(yarn.factor, 4.0);
  EXPECT_EQ(yarn.original_max_positions, 16);
  EXPECT_EQ(per_type->config.arch.layer_rope_scaling[1].factor, 2.5);
  // The model's own scaling, as reported, is the global layers'.
  EXPECT_EQ(per_type->config.positional.rope_scaling.type, T::kYarn);

  auto both = load(R"(, "global_rope_theta": 40000,
                       "rope_scaling": {"type": "dynamic", "factor": 2.0})",
                   {});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(types(*both),
            (std::vector<T>{T::kDynamic, T::kDynamic, T::kDynamic}));
  EXPECT_EQ(both->config.arch.layer_rope_base,
            (std::vector<double>{40000, 10000, 10000}));

  CheckpointOverrides o;
  o.rope_scaling = R"({"type": "linear", "factor": 3})";
  auto overridden = load(R"(, "rope_parameters": {
      "full_attention": {"rope_type": "yarn", "rope_theta": 40000,
                         "factor": 4, "beta_fast": 8},
      "sliding_attention": {"rope_theta": 5000}})",
                         o);
  ASSERT_TRUE(overridden.ok()) << overridden.status();
  EXPECT_EQ(types(*overridden),
            (std::vector<T>{T::kLinear, T::kLinear, T::kLinear}));
  EXPECT_EQ(overridden->config.arch.layer_rope_base,
            (std::vector<double>{40000, 5000, 5000}));
  EXPECT_EQ(overridden->config.arch.layer_rope_scaling[1].factor, 3.0);
  EXPECT_TRUE(overridden->config.positional.rope_scaling.overridden);

  const std::pair<std::string, std::string> refused[] = {
      {R"(, "rope_scaling": {"type": "linear", "factor": 2.0},
            "rope_parameters": {"sliding_attention": {"rope_type": "yarn",
                                                      "factor": 2}})",
       "in both rope_scaling and rope_parameters"},
      {R"(, "rope_parameters": {"sliding_attention": {"rope_type": "ntk",
                                                      "factor": 2}})",
       "type \"ntk\" is not supported"},
      {R"(, "rope_scaling": [2])", "\"rope_scaling\" must be an object"},
  };
  for (const auto& [extra, want] : refused) {
    ExpectRefused(ModernBertTensors(), ModernBertConfig(extra), want);
  }
}

// transformers 5 reads ModernBERT's sliding_window (half the window) and
// head_dim (the rotated width); only values on which both generations agree
// are served.
TEST_F(HfCheckpointTest, ModernBertSlidingWindowAndHeadDim) {
  for (const char* extra : {R"(, "sliding_window": 2)", R"(, "head_dim": 4)"}) {
    Write(ModernBertTensors(), ModernBertConfig(extra));
    auto loaded = Load();
    ASSERT_TRUE(loaded.ok()) << extra << ": " << loaded.status();
    EXPECT_EQ(loaded->config.arch.layer_window,
              (std::vector<int64_t>{0, 2, 2}));
  }
  const std::pair<std::string, std::string> refused[] = {
      {R"(, "sliding_window": 3)", "sliding_window 3 is not local_attention"},
      {R"(, "head_dim": 2)", "head_dim 2 rotates part of each head"},
  };
  for (const auto& [extra, want] : refused) {
    ExpectRefused(ModernBertTensors(), ModernBertConfig(extra), want);
  }
}

// Every key of the directory's JSON files is read, of no effect, or refused
// by name at a value the server does not serve (hf/config_keys.h); a key no
// table knows is carried out to be logged, and the model still loads.
TEST_F(HfCheckpointTest, ConfigKeysRefusedByNameOrReportedUnread) {
  auto with = [](const std::string& extra) {
    std::string config = BertConfig();
    config.insert(config.size() - 1, extra);
    return config;
  };
  Write(BertTensors(""), with(R"(, "is_decoder": false, "pruned_heads": {},
                                 "gradient_checkpointing": false)"));
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->unread_keys.empty());

  Write(BertTensors(""), with(R"(, "a_key_nobody_wrote": 3)"));
  loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->unread_keys,
            (std::vector<std::string>{"config.json: a_key_nobody_wrote"}));

  const std::pair<std::string, std::string> refused[] = {
      {R"(, "is_decoder": true)", "config.json: \"is_decoder\": true"},
      {R"(, "add_cross_attention": true)", "\"add_cross_attention\""},
      {R"(, "pruned_heads": {"0": [1]})", "\"pruned_heads\""},
  };
  for (const auto& [extra, want] : refused) {
    ExpectRefused(BertTensors(""), with(extra), want);
  }

  // A sentence-transformers module file's key, refused by name.
  Write(BertTensors(""));
  WriteText(dir_ + "/modules.json",
            R"([{"idx": 0, "name": "0", "path": "",
                 "type": "sentence_transformers.models.Transformer"}])");
  WriteText(dir_ + "/sentence_bert_config.json",
            R"({"transformer_task": "text-generation"})");
  auto bad = Load();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("sentence_bert_config.json: \"transformer_task\""));
}

TEST(ModelDirSpecTest, Names) {
  auto plain = ModelDirSpec("/models/bge-small-en-v1.5/");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->name, "bge-small-en-v1.5");
  EXPECT_EQ(plain->model_dir, "/models/bge-small-en-v1.5");
  auto named = ModelDirSpec("bge=/models/x");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->name, "bge");
  EXPECT_FALSE(ModelDirSpec("").ok());
}

}  // namespace
}  // namespace encoder::model

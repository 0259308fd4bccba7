// SentencePiece .model directories (T5's spiece.model, XLM-R's
// sentencepiece.bpe.model) against make_spm_reference.py's expected
// encodings (the sentencepiece library plus the Hugging Face slow
// tokenizers' rules, applied in Python), single texts and pairs, and their
// loading errors.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/tokenizer/tokenizer.h"

namespace encoder::tokenizer {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

fs::path FixtureDir() {
  const char* dir = std::getenv("ENCODER_SPM_FIXTURES");
  return dir != nullptr ? fs::path(dir) : fs::path();
}

json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::vector<std::vector<int64_t>> Pairs(const std::vector<Offsets>& v) {
  std::vector<std::vector<int64_t>> out;
  for (const Offsets& o : v) out.push_back({o.start, o.end});
  return out;
}

class SpmReference : public ::testing::TestWithParam<std::string> {};

TEST_P(SpmReference, MatchesSentencePieceWithTheSlowTokenizerRules) {
  const fs::path fixtures = FixtureDir();
  if (fixtures.empty()) GTEST_SKIP() << "ENCODER_SPM_FIXTURES not set";
  const json expected = ReadJson(fixtures / (GetParam() + ".json"));
  auto tok = LoadTokenizerFromDirectory(expected["dir"].get<std::string>());
  ASSERT_TRUE(tok.ok()) << tok.status();
  // The .model file itself loads the same tokenizer.
  const std::string file =
      expected["family"] == "t5" ? "spiece.model" : "sentencepiece.bpe.model";
  auto by_file = LoadTokenizer(
      (fs::path(expected["dir"].get<std::string>()) / file).string());
  ASSERT_TRUE(by_file.ok()) << by_file.status();
  EXPECT_EQ((*by_file)->vocab_size(), (*tok)->vocab_size());
  EXPECT_EQ((*tok)->kind(), "sentencepiece");
  EXPECT_EQ((*tok)->vocab_size(), expected["vocab_size"].get<int64_t>());
  size_t cases = 0, tokens = 0, decoded = 0, failures = 0;
  for (const json& c : expected["cases"]) {
    const std::string text = c["text"].get<std::string>();
    EncodeOptions options;
    if (c.contains("max_length")) {
      options.truncate = true;
      options.max_length = c["max_length"].get<int64_t>();
      options.side =
          c["side"] == "left" ? TruncationSide::kLeft : TruncationSide::kRight;
    }
    auto e = (*tok)->Encode(text, options);
    ASSERT_TRUE(e.ok()) << e.status() << " for " << c.dump();
    auto again = (*by_file)->Encode(text, options);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->ids, e->ids);
    const auto ids = c["ids"].get<std::vector<int64_t>>();
    const bool same =
        e->ids == ids &&
        e->tokens == c["tokens"].get<std::vector<std::string>>() &&
        Pairs(e->byte_offsets) ==
            c["bytes"].get<std::vector<std::vector<int64_t>>>() &&
        Pairs(e->char_offsets) ==
            c["chars"].get<std::vector<std::vector<int64_t>>>() &&
        e->special_tokens_mask == c["mask"].get<std::vector<uint8_t>>() &&
        e->type_ids == std::vector<int64_t>(ids.size(), 0);
    if (!same && ++failures <= 5) {
      json got = {{"ids", e->ids},
                  {"tokens", e->tokens},
                  {"bytes", Pairs(e->byte_offsets)},
                  {"chars", Pairs(e->char_offsets)},
                  {"mask", e->special_tokens_mask}};
      ADD_FAILURE() << "expected " << c.dump() << "\ngot " << got.dump();
    }
    ++cases;
    tokens += ids.size();
    for (const auto& [key, skip] :
         {std::pair<const char*, bool>{"decoded", false},
          {"decoded_skip", true}}) {
      if (!c.contains(key)) continue;
      auto text_back = (*tok)->Decode(ids, skip);
      ASSERT_TRUE(text_back.ok()) << text_back.status();
      EXPECT_EQ(*text_back, c[key].get<std::string>()) << c.dump();
      ++decoded;
    }
    // Template tokens are special ones (truncation of id inputs keeps them).
    for (size_t i = 0; i < ids.size(); ++i) {
      if (c["mask"][i] == 1) {
        EXPECT_TRUE((*tok)->IsSpecial(ids[i])) << ids[i];
      }
    }
  }
  EXPECT_EQ(failures, 0u);
  std::cout << GetParam() << ": " << cases << " encodings, " << tokens
            << " tokens (ids, tokens, byte and char offsets, special mask), "
            << decoded << " decodings compared\n";
}

// Sentence pairs: the slow tokenizers' pair template and longest_first
// truncation; a max_length below the template's special tokens is refused.
TEST_P(SpmReference, PairsMatchTheSlowTokenizerRules) {
  const fs::path fixtures = FixtureDir();
  if (fixtures.empty()) GTEST_SKIP() << "ENCODER_SPM_FIXTURES not set";
  const json expected = ReadJson(fixtures / (GetParam() + ".json"));
  auto tok = LoadTokenizerFromDirectory(expected["dir"].get<std::string>());
  ASSERT_TRUE(tok.ok()) << tok.status();
  size_t cases = 0, tokens = 0, refused = 0, failures = 0;
  for (const json& c : expected["pairs"]) {
    const std::string a = c["a"].get<std::string>();
    const std::string b = c["b"].get<std::string>();
    EncodeOptions options;
    if (c.contains("max_length")) {
      options.truncate = true;
      options.max_length = c["max_length"].get<int64_t>();
      options.side =
          c["side"] == "left" ? TruncationSide::kLeft : TruncationSide::kRight;
    }
    auto e = (*tok)->EncodePair(a, b, options);
    ASSERT_TRUE(e.ok()) << e.status() << " for " << c.dump();
    const std::vector<int64_t> sequence_ids(e->sequence_ids.begin(),
                                            e->sequence_ids.end());
    const json got = {{"ids", e->ids},
                      {"tokens", e->tokens},
                      {"bytes", Pairs(e->byte_offsets)},
                      {"chars", Pairs(e->char_offsets)},
                      {"mask", e->special_tokens_mask},
                      {"sequence_ids", sequence_ids}};
    bool same = e->type_ids == std::vector<int64_t>(e->size(), 0);
    for (const auto& [key, value] : got.items()) same = same && value == c[key];
    if (!same && ++failures <= 5) {
      ADD_FAILURE() << "expected " << c.dump() << "\ngot " << got.dump();
    }
    ++cases;
    tokens += e->size();
    if (c.contains("max_length")) continue;
    EncodeOptions small;
    small.truncate = true;
    small.max_length = c["added"].get<int64_t>() - 1;
    EXPECT_EQ((*tok)->EncodePair(a, b, small).status().code(),
              absl::StatusCode::kInvalidArgument);
    ++refused;
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_GT(cases, 0u);
  std::cout << GetParam() << ": " << cases << " pair encodings, " << tokens
            << " tokens (ids, tokens, byte and char offsets, special mask, "
               "sequence ids, type ids), "
            << refused << " too-small max_lengths refused\n";
}

INSTANTIATE_TEST_SUITE_P(Models, SpmReference,
                         ::testing::Values("t5_unigram", "t5_bpe", "t5_lower",
                                           "xlmr_bpe", "xlmr_unigram"));

class SpmLoading : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("spm_loading_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
  }
  static std::string Model(const std::string& name, const std::string& file) {
    std::ifstream in(FixtureDir() / name / file, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> Load() {
    return LoadTokenizerFromDirectory(dir_.string());
  }
  fs::path dir_;
};

TEST_F(SpmLoading, CorruptModelsAreInvalidArgument) {
  std::vector<std::string> bad = {"not a model", std::string(), "\x0a\xff"};
  if (!FixtureDir().empty()) {
    const std::string good = Model("t5_unigram", "spiece.model");
    ASSERT_GT(good.size(), 100u);
    bad.push_back(good.substr(0, good.size() / 2));  // cut short
  }
  for (const char* file : {"spiece.model", "sentencepiece.bpe.model"}) {
    for (const std::string& bytes : bad) {
      fs::remove_all(dir_);
      fs::create_directories(dir_);
      Write(file, bytes);
      auto tok = Load();
      ASSERT_FALSE(tok.ok()) << file;
      EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument)
          << tok.status();
      EXPECT_NE(tok.status().message().find(file), std::string::npos)
          << tok.status();
      EXPECT_NE(tok.status().message().find("not a valid SentencePiece model"),
                std::string::npos)
          << tok.status();
    }
  }
}

TEST_F(SpmLoading, OtherFamiliesAndBrokenConfigsAreRefused) {
  if (FixtureDir().empty()) GTEST_SKIP() << "ENCODER_SPM_FIXTURES not set";
  Write("spiece.model", Model("t5_unigram", "spiece.model"));
  Write("tokenizer_config.json", R"({"tokenizer_class": "AlbertTokenizer"})");
  auto albert = Load();
  ASSERT_FALSE(albert.ok());
  EXPECT_EQ(albert.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(albert.status().message().find("AlbertTokenizer"),
            std::string::npos)
      << albert.status();
  // Without a tokenizer_class, config.json's model_type decides.
  Write("tokenizer_config.json", "{}");
  Write("config.json", R"({"model_type": "albert"})");
  auto by_type = Load();
  ASSERT_FALSE(by_type.ok());
  EXPECT_EQ(by_type.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(by_type.status().message().find("albert"), std::string::npos)
      << by_type.status();
  Write("config.json", R"({"model_type": "mt5"})");
  EXPECT_TRUE(Load().ok());
  Write("tokenizer_config.json", "{not json");
  auto not_json = Load();
  EXPECT_EQ(not_json.status().code(), absl::StatusCode::kInvalidArgument);
  for (const char* config :
       {R"({"added_tokens_decoder": {"x1": {"content": "<a>"}}})",
        R"({"added_tokens_decoder": {"5": "<a>"}})",
        R"({"added_tokens_decoder": {"5": {"content": "<a>", "lstrip": 1}}})",
        R"({"added_tokens_decoder": {"99999999999999999999": {}}})",
        R"({"extra_ids": 1000000000})"}) {
    Write("tokenizer_config.json", config);
    auto bad = Load();
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument)
        << config << ": " << bad.status();
  }
  // T5 needs an end-of-sequence piece.
  Write("tokenizer_config.json", R"({"eos_token": "<nope>"})");
  auto no_eos = Load();
  EXPECT_EQ(no_eos.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_eos.status().message().find("<nope>"), std::string::npos);
}

TEST_F(SpmLoading, MarianSourceSpmIsNamed) {
  Write("source.spm", "x");
  auto tok = Load();
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(tok.status().message().find("tokenizer.json"), std::string::npos);
}

TEST_F(SpmLoading, BadInputsAreInvalidArgument) {
  if (FixtureDir().empty()) GTEST_SKIP() << "ENCODER_SPM_FIXTURES not set";
  Write("sentencepiece.bpe.model",
        Model("xlmr_bpe", "sentencepiece.bpe.model"));
  auto tok = Load();
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto e = (*tok)->Encode("ok \xc3", EncodeOptions{});
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  const int64_t n = (*tok)->vocab_size();
  for (int64_t id : {int64_t{-1}, n, int64_t{1} << 40}) {
    auto d = (*tok)->Decode({0, id, 2}, false);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << id;
  }
  // Every id decodes and has a label; specials are the fairseq four and
  // <mask>.
  for (int64_t id = 0; id < n; ++id) {
    ASSERT_TRUE((*tok)->Decode({id}, false).ok()) << id;
    EXPECT_FALSE((*tok)->Label(id).empty()) << id;
  }
  EXPECT_EQ((*tok)->Label(n - 1), "<mask>");
  for (int64_t id : {0, 1, 2, 3}) EXPECT_TRUE((*tok)->IsSpecial(id));
  EXPECT_TRUE((*tok)->IsSpecial(n - 1));
  EXPECT_FALSE((*tok)->IsSpecial(4));
  // Long inputs stay linear enough to finish.
  auto big = (*tok)->Encode(std::string(1 << 20, 'a'), EncodeOptions{});
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->byte_offsets.back(), (Offsets{0, 0}));
}

// One tokenizer shared by threads (as the server's requests share it) gives
// each thread the encodings it gives alone.
TEST_F(SpmLoading, ConcurrentEncodesAgree) {
  if (FixtureDir().empty()) GTEST_SKIP() << "ENCODER_SPM_FIXTURES not set";
  Write("spiece.model", Model("t5_bpe", "spiece.model"));
  auto tok = Load();
  ASSERT_TRUE(tok.ok()) << tok.status();
  const json expected = ReadJson(FixtureDir() / "t5_bpe.json");
  std::vector<std::string> texts;
  std::vector<std::vector<int64_t>> want;
  for (const json& c : expected["cases"]) {
    if (c.contains("max_length")) continue;
    texts.push_back(c["text"].get<std::string>());
    want.push_back(c["ids"].get<std::vector<int64_t>>());
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = t; i < texts.size() + t; ++i) {
          const size_t k = i % texts.size();
          auto e = (*tok)->Encode(texts[k], EncodeOptions{});
          if (!e.ok() || e->ids != want[k]) ++mismatches;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace encoder::tokenizer

// Loading errors and input validation of the tokenizer.json pipeline.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "server/tokenizer/tokenizer.h"
#include "server/tokenizer/unicode.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ENCODER_TEST_SANITIZED 1
#endif
#endif

namespace encoder::tokenizer {
namespace {

namespace fs = std::filesystem;

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tokenizer_loader_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::string Message(const absl::Status& s) {
    return std::string(s.message());
  }
  fs::path dir_;
};

constexpr char kWordPiece[] = R"({
  "added_tokens": [{"id": 0, "content": "[UNK]", "special": true,
                    "normalized": false},
                   {"id": 1, "content": "[CLS]", "special": true,
                    "normalized": false},
                   {"id": 2, "content": "[SEP]", "special": true,
                    "normalized": false}],
  "normalizer": {"type": "BertNormalizer", "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2],
                     "cls": ["[CLS]", 1]},
  "decoder": {"type": "WordPiece"},
  "model": {"type": "WordPiece", "unk_token": "[UNK]",
            "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "un": 3,
                      "##aff": 4, "##able": 5, "a": 6, "!": 7}}
})";

TEST_F(LoaderTest, WordPieceByHand) {
  auto tok = LoadTokenizerJson(Write("tokenizer.json", kWordPiece));
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto e = (*tok)->Encode("UNAFFABLE a!", EncodeOptions{});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->ids, (std::vector<int64_t>{1, 3, 4, 5, 6, 7, 2}));
  EXPECT_EQ(e->tokens[2], "##aff");
  EXPECT_EQ(e->byte_offsets[2], (Offsets{2, 5}));
  EXPECT_EQ((*tok)->kind(), "wordpiece");
  auto text = (*tok)->Decode(e->ids, true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "unaffable a!");
  // Directory loading finds the same file.
  auto from_dir = LoadTokenizerFromDirectory(dir_.string());
  ASSERT_TRUE(from_dir.ok()) << from_dir.status();
}

TEST_F(LoaderTest, TruncationKeepsSpecialTokensOnTheirSide) {
  auto tok = LoadTokenizerJson(Write("tokenizer.json", kWordPiece));
  ASSERT_TRUE(tok.ok());
  EncodeOptions o;
  o.truncate = true;
  o.max_length = 4;
  auto right = (*tok)->Encode("unaffable a !", o);
  ASSERT_TRUE(right.ok());
  EXPECT_EQ(right->ids, (std::vector<int64_t>{1, 3, 4, 2}));
  o.side = TruncationSide::kLeft;
  auto left = (*tok)->Encode("unaffable a !", o);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->ids, (std::vector<int64_t>{1, 6, 7, 2}));
}

TEST_F(LoaderTest, UnknownComponentTypeIsNamed) {
  std::string text = kWordPiece;
  text.replace(text.find("BertPreTokenizer"), 16, "FancySplitter");
  auto tok = LoadTokenizerJson(Write("tokenizer.json", text));
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(tok.status()).find("pre_tokenizer type 'FancySplitter'"),
            std::string::npos)
      << tok.status();
}

// Ids and lengths must be integers: a float id (1e30 is beyond int64) was
// converted with undefined behaviour before the loader checked its kind.
TEST_F(LoaderTest, NonIntegerIdsAreInvalidArgument) {
  const std::pair<const char*, const char*> edits[] = {
      {"\"un\": 3", "\"un\": 1e30"},                             // model vocab
      {"\"sep\": [\"[SEP]\", 2]", "\"sep\": [\"[SEP]\", 2.5]"},  // post
      {"{\"id\": 0, ", "{\"id\": -1e30, "}};                     // added token
  for (const auto& [from, to] : edits) {
    std::string text = kWordPiece;
    text.replace(text.find(from), std::string(from).size(), to);
    auto tok = LoadTokenizerJson(Write("float_id.json", text));
    ASSERT_FALSE(tok.ok()) << to;
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << to;
    EXPECT_NE(Message(tok.status()).find("expected an integer"),
              std::string::npos)
        << tok.status();
  }
}

// A TemplateProcessing special token lists its ids and its tokens apart;
// lists of different lengths once read past the shorter one (found by the
// tokenizer_json fuzz target). The Hugging Face library refuses them too.
TEST_F(LoaderTest, TemplateSpecialTokenIdsAndTokensMustPair) {
  std::string text = kWordPiece;
  const std::string bert =
      R"("post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2],
                     "cls": ["[CLS]", 1]},)";
  ASSERT_NE(text.find(bert), std::string::npos);
  const std::string templ =
      R"("post_processor": {"type": "TemplateProcessing",
         "single": [{"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": "end", "type_id": 0}}],
         "pair": [],
         "special_tokens": {"end": {"id": "end", "ids": IDS,
                                    "tokens": ["[SEP]", "[CLS]"]}}},)";
  std::string paired = templ;
  paired.replace(paired.find("IDS"), 3, "[2, 1]");
  text.replace(text.find(bert), bert.size(), paired);
  auto ok = LoadTokenizerJson(Write("tokenizer.json", text));
  ASSERT_TRUE(ok.ok()) << ok.status();
  auto e = (*ok)->Encode("a", EncodeOptions{});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->ids, (std::vector<int64_t>{6, 2, 1}));
  EXPECT_EQ(e->tokens, (std::vector<std::string>{"a", "[SEP]", "[CLS]"}));

  for (const char* ids : {"[2, 1, 1]", "[2]"}) {
    std::string bad = kWordPiece;
    std::string unpaired = templ;
    unpaired.replace(unpaired.find("IDS"), 3, ids);
    bad.replace(bad.find(bert), bert.size(), unpaired);
    auto tok = LoadTokenizerJson(Write("tokenizer.json", bad));
    ASSERT_FALSE(tok.ok()) << ids;
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(Message(tok.status()).find("must be of the same length"),
              std::string::npos)
        << tok.status();
  }
}

// Ids index dense tables and a fixed padding length pads every encoding:
// one huge value in a hostile file allocated without bound (found by the
// tokenizer_json fuzz target: a WordPiece id of 3.2e15).
TEST_F(LoaderTest, HugeIdsAndPaddingAreInvalidArgument) {
  const std::pair<const char*, const char*> edits[] = {
      {"\"un\": 3", "\"un\": 3239017322010000"},  // model vocab
      {"\"un\": 3", "\"un\": -3"},                // negative
      {"\"sep\": [\"[SEP]\", 2]", "\"sep\": [\"[SEP]\", 4194304]"},  // post
      {"{\"id\": 0, ", "{\"id\": 9000000000, "},  // added token
      {"\"added_tokens\"",
       "\"padding\": {\"strategy\": {\"Fixed\": 1099511627776}},\n"
       "  \"added_tokens\""}};
  for (const auto& [from, to] : edits) {
    std::string text = kWordPiece;
    ASSERT_NE(text.find(from), std::string::npos) << from;
    text.replace(text.find(from), std::string(from).size(), to);
    auto tok = LoadTokenizerJson(Write("huge.json", text));
    ASSERT_FALSE(tok.ok()) << to;
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << to;
    EXPECT_NE(Message(tok.status()).find("is outside [0, "), std::string::npos)
        << tok.status();
  }
}

TEST_F(LoaderTest, BadFilesAreClearErrors) {
  auto missing = LoadTokenizer((dir_ / "nope.json").string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto empty_dir = LoadTokenizerFromDirectory(dir_.string());
  EXPECT_EQ(empty_dir.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(Message(empty_dir.status()).find("vocab.txt"), std::string::npos);
  auto not_json = LoadTokenizerJson(Write("bad.json", "{not json"));
  EXPECT_EQ(not_json.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_regex = LoadTokenizerJson(
      Write("re.json", R"({"pre_tokenizer": {"type": "Split", "pattern":
          {"Regex": "(unclosed"}, "behavior": "Isolated"},
          "model": {"type": "BPE", "vocab": {}, "merges": []}})"));
  EXPECT_EQ(bad_regex.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(bad_regex.status()).find("(unclosed"), std::string::npos);
  auto bad_sp = LoadTokenizer(
      (fs::path(Write("spiece.model", "not a model")).parent_path()).string());
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || \
    defined(ENCODER_TEST_SANITIZED)
  // Sanitizer builds have no SentencePiece module (see sentencepiece.cc).
  EXPECT_EQ(bad_sp.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(Message(bad_sp.status()).find("sanitizer builds"),
            std::string::npos);
#else
  EXPECT_EQ(bad_sp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(bad_sp.status()).find("spiece.model"), std::string::npos);
#endif
}

TEST_F(LoaderTest, VocabTxtHonoursDoLowerCase) {
  Write("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nHello\n");
  Write("tokenizer_config.json", R"({"do_lower_case": false})");
  auto cased = LoadTokenizerFromDirectory(dir_.string());
  ASSERT_TRUE(cased.ok()) << cased.status();
  auto e = (*cased)->Encode("Hello hello", EncodeOptions{});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->ids, (std::vector<int64_t>{2, 5, 4, 3}));
  Write("tokenizer_config.json", R"({"do_lower_case": true})");
  auto lower = LoadTokenizerFromDirectory(dir_.string());
  ASSERT_TRUE(lower.ok());
  auto l = (*lower)->Encode("Hello hello", EncodeOptions{});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->ids, (std::vector<int64_t>{2, 4, 4, 3}));
}

// sentence-transformers' do_lower_case (LoadOptions::lowercase): a
// Lowercase normalizer before the tokenizer's own, whatever the file says,
// offsets still into the original text; vocab.txt with do_lower_case
// false too.
TEST_F(LoaderTest, LowercaseOptionPrependsALowercaseNormalizer) {
  std::string cased = kWordPiece;
  const std::string bert = R"({"type": "BertNormalizer", "lowercase": true})";
  cased.replace(cased.find(bert), bert.size(),
                R"({"type": "BertNormalizer", "lowercase": false,
                    "strip_accents": false})");
  const std::string vocab = R"("!": 7)";
  cased.replace(cased.find(vocab), vocab.size(),
                R"("!": 7, "UN": 8, "i)"
                "\xcc\x87"
                R"(": 9)");
  const std::string path = Write("tokenizer.json", cased);
  auto plain = LoadTokenizerJson(path);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto e = (*plain)->Encode("UN", EncodeOptions{});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->ids, (std::vector<int64_t>{1, 8, 2}));
  LoadOptions lower;
  lower.lowercase = true;
  auto lowered = LoadTokenizerJson(path, lower);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  // U+0130 lowercases to "i" and a combining dot above, two code points.
  auto l = (*lowered)->Encode("UNAFFABLE \xc4\xb0", EncodeOptions{});
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->ids, (std::vector<int64_t>{1, 3, 4, 5, 9, 2}));
  EXPECT_EQ(l->byte_offsets[4], (Offsets{10, 12}));
  auto from_dir = LoadTokenizerFromDirectory(dir_.string(), lower);
  ASSERT_TRUE(from_dir.ok());
  auto d = (*from_dir)->Encode("UN", EncodeOptions{});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->ids, (std::vector<int64_t>{1, 3, 2}));

  fs::remove(dir_ / "tokenizer.json");
  Write("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nHello\n");
  Write("tokenizer_config.json", R"({"do_lower_case": false})");
  auto vocab_lowered = LoadTokenizerFromDirectory(dir_.string(), lower);
  ASSERT_TRUE(vocab_lowered.ok()) << vocab_lowered.status();
  auto v = (*vocab_lowered)->Encode("Hello hello", EncodeOptions{});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->ids, (std::vector<int64_t>{2, 4, 4, 3}));
}

TEST_F(LoaderTest, LongWhitespaceRunsAndWordsStayFine) {
  std::string text = kWordPiece;
  text.replace(text.find(R"({"type": "BertPreTokenizer"})"), 28,
               R"({"type": "Split", "pattern": {"Regex": "\\s+(?!\\S)|\\s+"},
                   "behavior": "Removed"})");
  auto tok = LoadTokenizerJson(Write("tokenizer.json", text));
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string input =
      "a" + std::string(1 << 20, ' ') + "un" + std::string(300, 'a');
  auto e = (*tok)->Encode(input, EncodeOptions{});
  ASSERT_TRUE(e.ok()) << e.status();
  // [CLS] a [UNK] [SEP]: the 302-character word is over the 100 limit.
  EXPECT_EQ(e->ids, (std::vector<int64_t>{1, 6, 0, 2}));
  EXPECT_EQ(e->byte_offsets[2], (Offsets{(1 << 20) + 1, (1 << 20) + 303}));
}

TEST(Utf8, InvalidSequencesNameTheirOffset) {
  struct Case {
    std::string text;
    std::string offset;
  } cases[] = {{"ok\x80", "offset 2"},             // stray continuation
               {"\xc3", "offset 0"},               // truncated
               {"a\xc0\xaf", "offset 1"},          // overlong
               {"ab\xed\xa0\x80", "offset 2"},     // surrogate
               {"\xf4\x90\x80\x80", "offset 0"}};  // above U+10FFFF
  for (const Case& c : cases) {
    absl::Status s = ValidateUtf8(c.text);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(std::string(s.message()).find(c.offset), std::string::npos) << s;
  }
  EXPECT_TRUE(ValidateUtf8("h\xc3\xa9 \xf0\x9f\x98\x80").ok());
}

}  // namespace
}  // namespace encoder::tokenizer

// Tokenize / Decode RPCs and text options on a real server: the built-in
// byte tokenizer and a tokenizer.json named by a repository entry.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/service/test_server.h"

namespace encoder::testing {
namespace {

namespace fs = std::filesystem;
using grpc::StatusCode;

// A small BERT-style tokenizer: ids 0..7, so it fits the 300-id models.
constexpr char kWordPiece[] = R"({
  "added_tokens": [
    {"id": 0, "content": "[UNK]", "special": true, "normalized": false},
    {"id": 1, "content": "[CLS]", "special": true, "normalized": false},
    {"id": 2, "content": "[SEP]", "special": true, "normalized": false}],
  "normalizer": {"type": "BertNormalizer", "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2],
                     "cls": ["[CLS]", 1]},
  "decoder": {"type": "WordPiece"},
  "model": {"type": "WordPiece", "unk_token": "[UNK]",
            "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "un": 3,
                      "##aff": 4, "##able": 5, "a": 6, "!": 7}}
})";

class TokenizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tokenize_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "tokenizer.json") << kWordPiece;
    TestServerOptions options;
    model::ModelSpec wp = options.repository.models[2];  // learned, 24 pos.
    wp.name = "wp";
    wp.tokenizer_path = (dir_ / "tokenizer.json").string();
    options.repository.models.push_back(wp);
    // The same model with prompts, and with a default prompt.
    model::ModelSpec prompted = wp;
    prompted.name = "wp_prompts";
    prompted.prompts = {{"query", "a ! "}, {"passage", "unaffable "}};
    options.repository.models.push_back(prompted);
    prompted.name = "wp_default";
    prompted.default_prompt_name = "query";
    options.repository.models.push_back(prompted);
    // Texts stripped as sentence-transformers up to 5.3 did.
    model::ModelSpec stripped = options.repository.models[3];  // rope
    stripped.name = "rope_strip";
    stripped.strip_text = true;
    options.repository.models.push_back(stripped);
    server_ = std::make_unique<TestServer>(options);
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  grpc::Status Tokenize(const v1::TokenizeRequest& r,
                        v1::TokenizeResponse* out) {
    grpc::ClientContext context;
    return server_->stub().Tokenize(&context, r, out);
  }

  fs::path dir_;
  std::unique_ptr<TestServer> server_;
};

std::vector<int64_t> Ids(const v1::Encoding& e) {
  return std::vector<int64_t>(e.ids().begin(), e.ids().end());
}

TEST_F(TokenizeTest, ListModelsNamesEachTokenizer) {
  grpc::ClientContext context;
  v1::ListModelsResponse models;
  ASSERT_TRUE(server_->stub().ListModels(&context, {}, &models).ok());
  for (const v1::ModelInfo& m : models.models()) {
    EXPECT_EQ(m.tokenizer(),
              m.name().rfind("wp", 0) == 0 ? "wordpiece" : "byte")
        << m.name();
  }
}

TEST_F(TokenizeTest, TokenizeGivesIdsTokensOffsetsAndMask) {
  v1::TokenizeRequest r;
  r.set_model("wp");
  r.add_texts("UNAFFABLE a!");
  r.add_texts("a");
  v1::TokenizeResponse out;
  ASSERT_TRUE(Tokenize(r, &out).ok());
  EXPECT_EQ(out.tokenizer(), "wordpiece");
  ASSERT_EQ(out.encodings_size(), 2);
  const v1::Encoding& e = out.encodings(0);
  EXPECT_EQ(Ids(e), (std::vector<int64_t>{1, 3, 4, 5, 6, 7, 2}));
  EXPECT_EQ(e.tokens(2), "##aff");
  EXPECT_EQ(e.byte_offsets(4), 2);  // "##aff" is bytes [2, 5)
  EXPECT_EQ(e.byte_offsets(5), 5);
  EXPECT_TRUE(e.special_tokens_mask(0));
  EXPECT_FALSE(e.special_tokens_mask(1));
  EXPECT_EQ(Ids(out.encodings(1)), (std::vector<int64_t>{1, 6, 2}));

  v1::TokenizeRequest bytes;  // the built-in byte tokenizer
  bytes.set_model("rope");
  bytes.add_texts("Hé");
  ASSERT_TRUE(Tokenize(bytes, &out).ok());
  EXPECT_EQ(Ids(out.encodings(0)),
            (std::vector<int64_t>{1, 4 + 0x48, 4 + 0xc3, 4 + 0xa9, 2}));
  EXPECT_EQ(out.encodings(0).char_offsets(7), 2);  // 'é' second byte: char 1
}

TEST_F(TokenizeTest, StripTextDropsEdgeWhitespaceAndKeepsOffsetsOnTheText) {
  grpc::ClientContext context;
  v1::ListModelsResponse models;
  ASSERT_TRUE(server_->stub().ListModels(&context, {}, &models).ok());
  for (const v1::ModelInfo& m : models.models()) {
    EXPECT_EQ(m.strip_text(), m.name() == "rope_strip") << m.name();
  }
  // Python's str.isspace at both ends: U+3000, space, tab before; U+001F
  // (a separator Python counts as space), newline, U+00A0 after. The
  // space inside stays.
  v1::TokenizeRequest r;
  r.set_model("rope_strip");
  r.add_texts("\u3000 \tH\xc3\xa9 x\x1f\n\xc2\xa0");
  r.add_texts(" \n ");           // all whitespace: the special tokens alone
  r.add_texts("\xe2\x80\x8bx");  // U+200B is not space in Python
  v1::TokenizeResponse out;
  ASSERT_TRUE(Tokenize(r, &out).ok());
  const v1::Encoding& e = out.encodings(0);
  EXPECT_EQ(Ids(e), (std::vector<int64_t>{1, 4 + 'H', 4 + 0xc3, 4 + 0xa9,
                                          4 + ' ', 4 + 'x', 2}));
  // Offsets stay on the text as sent: 'H' is byte 5 (U+3000 takes three),
  // code point 3; 'x' is byte 9, code point 6.
  EXPECT_EQ(e.byte_offsets(2), 5);
  EXPECT_EQ(e.byte_offsets(3), 6);
  EXPECT_EQ(e.char_offsets(2), 3);
  EXPECT_EQ(e.byte_offsets(10), 9);
  EXPECT_EQ(e.char_offsets(10), 6);
  EXPECT_EQ(Ids(out.encodings(1)), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(out.encodings(2).ids_size(), 6);
  // The same texts on the model that keeps them whole.
  r.set_model("rope");
  ASSERT_TRUE(Tokenize(r, &out).ok());
  EXPECT_EQ(out.encodings(0).ids_size(), 16);
  EXPECT_EQ(Ids(out.encodings(1)).size(), 5u);

  // Invalid UTF-8 after stripped space names its byte in the text as sent.
  v1::TokenizeRequest bad;
  bad.set_model("rope_strip");
  bad.add_texts_bytes("  ok\xff");
  grpc::Status s = Tokenize(bad, &out);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("byte offset 4"), std::string::npos)
      << s.error_message();
}

TEST_F(TokenizeTest, TruncationKeepsTheSpecialTokenOnItsSide) {
  v1::TokenizeRequest r;
  r.set_model("wp");
  r.add_texts("unaffable a !");
  r.set_truncate(true);
  r.set_max_length(4);
  v1::TokenizeResponse out;
  ASSERT_TRUE(Tokenize(r, &out).ok());
  EXPECT_EQ(Ids(out.encodings(0)), (std::vector<int64_t>{1, 3, 4, 2}));
  EXPECT_TRUE(out.encodings(0).truncated());
  r.mutable_text_options()->set_truncation_side(v1::TRUNCATION_SIDE_LEFT);
  ASSERT_TRUE(Tokenize(r, &out).ok());
  EXPECT_EQ(Ids(out.encodings(0)), (std::vector<int64_t>{1, 6, 7, 2}));
}

TEST_F(TokenizeTest, EmbedTextUsesTheModelTokenizerAndItsOptions) {
  // 30 words -> 32 tokens with [CLS]/[SEP]; the learned table holds 24.
  std::string text;
  for (int i = 0; i < 30; ++i) text += "a ";
  v1::EmbedRequest too_long;
  too_long.set_model("wp");
  too_long.add_inputs()->set_text(text);
  v1::EmbedResponse response;
  // Unset truncate: the server's default cuts it, 8 of its 32 tokens.
  ASSERT_TRUE(Call(server_->stub(), too_long, &response).ok());
  EXPECT_TRUE(response.results(0).truncated());
  EXPECT_EQ(response.results(0).num_tokens(), 24);
  EXPECT_EQ(response.results(0).truncated_tokens(), 8);
  too_long.set_truncate(false);
  grpc::Status s = Call(server_->stub(), too_long, &response);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("32 tokens"), std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("at most 24"), std::string::npos);

  // Truncated on the left: [CLS] + the last 22 words + [SEP], the same
  // embedding as those ids sent directly.
  v1::EmbedRequest left = too_long;
  left.set_truncate(true);
  left.mutable_text_options()->set_truncation_side(v1::TRUNCATION_SIDE_LEFT);
  ASSERT_TRUE(Call(server_->stub(), left, &response).ok());
  EXPECT_TRUE(response.results(0).truncated());
  EXPECT_EQ(response.results(0).num_tokens(), 24);
  EXPECT_EQ(response.results(0).truncated_tokens(), 8);
  std::vector<int64_t> ids(24, 6);
  ids.front() = 1;
  ids.back() = 2;
  v1::EmbedResponse direct;
  ASSERT_TRUE(Call(server_->stub(), IdsRequest("wp", {ids}), &direct).ok());
  EXPECT_EQ(Floats(response.results(0).pooled()),
            Floats(direct.results(0).pooled()));

  v1::EmbedRequest bare;
  bare.set_model("wp");
  bare.add_inputs()->set_text("a a a");
  bare.mutable_text_options()->set_add_special_tokens(false);
  ASSERT_TRUE(Call(server_->stub(), bare, &response).ok());
  EXPECT_EQ(response.results(0).num_tokens(), 3);
}

TEST_F(TokenizeTest, TruncatedTokenIdsKeepTheSpecialTokenOnTheCutSide) {
  // [CLS] 3 4 ... 32 [SEP]: 32 ids, the learned table holds 24.
  std::vector<int64_t> long_ids = {1};
  for (int64_t id = 3; id <= 32; ++id) long_ids.push_back(id);
  long_ids.push_back(2);
  auto embed = [&](const std::vector<int64_t>& ids, bool truncate,
                   v1::TruncationSide side, v1::EmbedResponse* out) {
    v1::EmbedRequest r = IdsRequest("wp", {ids});
    r.set_truncate(truncate);
    r.mutable_text_options()->set_truncation_side(side);
    return Call(server_->stub(), r, out);
  };
  // Right: [CLS] 3..24 [SEP]; left: [CLS] 11..32 [SEP].
  std::vector<int64_t> right = {1}, left = {1};
  for (int64_t id = 3; id <= 24; ++id) right.push_back(id);
  for (int64_t id = 11; id <= 32; ++id) left.push_back(id);
  right.push_back(2);
  left.push_back(2);
  ASSERT_EQ(right.size(), 24u);
  ASSERT_EQ(left.size(), 24u);
  for (auto [side, expected] :
       {std::pair{v1::TRUNCATION_SIDE_UNSPECIFIED, right},
        std::pair{v1::TRUNCATION_SIDE_RIGHT, right},
        std::pair{v1::TRUNCATION_SIDE_LEFT, left}}) {
    v1::EmbedResponse cut, direct;
    ASSERT_TRUE(embed(long_ids, true, side, &cut).ok());
    ASSERT_TRUE(embed(expected, false, side, &direct).ok());
    EXPECT_TRUE(cut.results(0).truncated());
    EXPECT_EQ(cut.results(0).num_tokens(), 24);
    EXPECT_EQ(Floats(cut.results(0).pooled()),
              Floats(direct.results(0).pooled()))
        << "side " << side;
  }
  // Ids that end in an ordinary token are cut plainly: 3..34 -> 3..26.
  std::vector<int64_t> plain, plain_cut;
  for (int64_t id = 3; id <= 34; ++id) plain.push_back(id);
  for (int64_t id = 3; id <= 26; ++id) plain_cut.push_back(id);
  v1::EmbedResponse cut, direct;
  ASSERT_TRUE(embed(plain, true, v1::TRUNCATION_SIDE_RIGHT, &cut).ok());
  ASSERT_TRUE(embed(plain_cut, false, v1::TRUNCATION_SIDE_RIGHT, &direct).ok());
  EXPECT_EQ(Floats(cut.results(0).pooled()),
            Floats(direct.results(0).pooled()));
}

TEST_F(TokenizeTest, PromptsArePrependedToTextInputsOnly) {
  auto embed = [&](const std::string& model, const std::string& text,
                   const std::string& prompt_name, v1::EmbedResponse* out) {
    v1::EmbedRequest r;
    r.set_model(model);
    r.add_inputs()->set_text(text);
    r.set_prompt_name(prompt_name);
    return Call(server_->stub(), r, out);
  };
  // The definition: the prompt's text, then the input, tokenized together
  // ("a ! " + "a", "unaffable " + "a"), on the same weights.
  struct Case {
    std::string model, prompt_name, whole_text;
  };
  for (const Case& c : {Case{"wp_prompts", "query", "a ! a"},
                        Case{"wp_prompts", "passage", "unaffable a"},
                        Case{"wp_default", "", "a ! a"},
                        Case{"wp_default", "passage", "unaffable a"},
                        Case{"wp_prompts", "", "a"}}) {
    v1::EmbedResponse with_prompt, whole;
    ASSERT_TRUE(embed(c.model, "a", c.prompt_name, &with_prompt).ok())
        << c.model << " " << c.prompt_name;
    ASSERT_TRUE(embed("wp", c.whole_text, "", &whole).ok());
    EXPECT_EQ(with_prompt.results(0).num_tokens(),
              whole.results(0).num_tokens())
        << c.model << " " << c.prompt_name;
    EXPECT_EQ(Floats(with_prompt.results(0).pooled()),
              Floats(whole.results(0).pooled()))
        << c.model << " " << c.prompt_name;
  }

  // Token ids are taken as they are, prompt or not.
  v1::EmbedRequest ids = IdsRequest("wp_default", {{1, 6, 2}});
  ids.set_prompt_name("passage");
  v1::EmbedResponse ids_out, plain;
  ASSERT_TRUE(Call(server_->stub(), ids, &ids_out).ok());
  ASSERT_TRUE(
      Call(server_->stub(), IdsRequest("wp", {{1, 6, 2}}), &plain).ok());
  EXPECT_EQ(Floats(ids_out.results(0).pooled()),
            Floats(plain.results(0).pooled()));

  v1::EmbedResponse out;
  grpc::Status s = embed("wp_prompts", "a", "search", &out);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("its prompts: passage, query"),
            std::string::npos)
      << s.error_message();
  s = embed("wp", "a", "query", &out);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("(it has none)"), std::string::npos)
      << s.error_message();

  // A caller's own prompt text: prepended like a named one, replacing the
  // model's default (an empty one means none); not with prompt_name.
  auto own = [&](const std::string& model, const std::string& prompt,
                 const std::string& prompt_name, v1::EmbedResponse* out) {
    v1::EmbedRequest r;
    r.set_model(model);
    r.add_inputs()->set_text("a");
    r.set_prompt(prompt);
    r.set_prompt_name(prompt_name);
    return Call(server_->stub(), r, out);
  };
  for (const Case& c : {Case{"wp", "unaffable ", "unaffable a"},
                        Case{"wp_default", "unaffable ", "unaffable a"},
                        Case{"wp_default", "", "a"}}) {
    v1::EmbedResponse with_prompt, whole;
    ASSERT_TRUE(own(c.model, c.prompt_name, "", &with_prompt).ok())
        << c.model << " " << c.prompt_name;
    ASSERT_TRUE(embed("wp", c.whole_text, "", &whole).ok());
    EXPECT_EQ(Floats(with_prompt.results(0).pooled()),
              Floats(whole.results(0).pooled()))
        << c.model << " " << c.prompt_name;
  }
  s = own("wp_prompts", "unaffable ", "query", &out);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("not both"), std::string::npos)
      << s.error_message();

  // ListModels reports them.
  v1::ListModelsResponse listed;
  grpc::ClientContext context;
  ASSERT_TRUE(server_->stub()
                  .ListModels(&context, v1::ListModelsRequest(), &listed)
                  .ok());
  bool seen = false;
  for (const v1::ModelInfo& m : listed.models()) {
    if (m.name() != "wp_default") continue;
    seen = true;
    EXPECT_EQ(m.default_prompt_name(), "query");
    ASSERT_EQ(m.prompts().size(), 2u);
    EXPECT_EQ(m.prompts().at("query"), "a ! ");
  }
  EXPECT_TRUE(seen);
}

TEST_F(TokenizeTest, InvalidUtf8IsInvalidArgumentNamingTheByte) {
  v1::EmbedRequest embed;
  embed.set_model("rope");
  embed.add_inputs()->set_text_bytes("ok\xff!");
  v1::EmbedResponse response;
  grpc::Status s = Call(server_->stub(), embed, &response);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("inputs[0]"), std::string::npos);
  EXPECT_NE(s.error_message().find("byte offset 2"), std::string::npos)
      << s.error_message();

  v1::TokenizeRequest r;
  r.set_model("wp");
  r.add_texts("fine");
  r.add_texts_bytes("\xe2\x82");  // a truncated 3-byte sequence
  v1::TokenizeResponse out;
  s = Tokenize(r, &out);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("texts_bytes[0]"), std::string::npos);
  EXPECT_NE(s.error_message().find("byte offset 0"), std::string::npos)
      << s.error_message();

  // The same bytes in the proto3 `string` field: the service parses the
  // request itself and names the field and the byte.
  v1::EmbedRequest as_string;
  as_string.set_model("rope");
  as_string.add_inputs()->set_text("ok\xff!");
  s = Call(server_->stub(), as_string, &response);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_EQ(s.error_message(),
            "inputs[0].text is not valid UTF-8 (byte 2 of the field)");
  EXPECT_EQ(response.results_size(), 0);
  r.clear_texts_bytes();
  r.add_texts("\xe2\x82");
  s = Tokenize(r, &out);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "texts[1] is not valid UTF-8 (byte 0 of the field)");
}

TEST_F(TokenizeTest, DecodeAndItsErrors) {
  v1::DecodeRequest r;
  r.set_model("wp");
  v1::TokenIds* ids = r.add_inputs();
  for (int64_t id : {1, 3, 4, 5, 6, 7, 2}) ids->add_ids(id);
  r.set_skip_special_tokens(true);
  v1::DecodeResponse out;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(server_->stub().Decode(&context, r, &out).ok());
  }
  EXPECT_EQ(out.texts(0), "unaffable a!");
  r.mutable_inputs(0)->add_ids(99);
  grpc::ClientContext context;
  grpc::Status s = server_->stub().Decode(&context, r, &out);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("token id 99"), std::string::npos);
  v1::TokenizeRequest unknown;
  unknown.set_model("nope");
  unknown.add_texts("x");
  v1::TokenizeResponse t;
  EXPECT_EQ(Tokenize(unknown, &t).error_code(), StatusCode::NOT_FOUND);
  v1::TokenizeRequest none;
  EXPECT_EQ(Tokenize(none, &t).error_code(), StatusCode::INVALID_ARGUMENT);
}

TEST_F(TokenizeTest, DiagnoseLabelsAreTheTokenizerTokens) {
  v1::DiagnoseRequest r;
  r.set_model("wp");
  r.set_text("unaffable!");
  r.set_attention_stats(true);
  v1::DiagnoseResponse out;
  grpc::ClientContext context;
  ASSERT_TRUE(server_->stub().Diagnose(&context, r, &out).ok());
  const std::vector<std::string> labels(out.token_labels().begin(),
                                        out.token_labels().end());
  EXPECT_EQ(labels, (std::vector<std::string>{"[CLS]", "un", "##aff", "##able",
                                              "!", "[SEP]"}));
}

}  // namespace
}  // namespace encoder::testing

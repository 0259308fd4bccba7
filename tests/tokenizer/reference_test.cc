// Every fixture tokenizer against the Hugging Face tokenizers library: ids,
// tokens, byte and character offsets, special-token masks, type ids,
// encodings without special tokens, truncation on both sides and decoding,
// on every line of the hostile corpus and on a 1 MB input. The expected
// files come from tests/tokenizer/make_reference.js (run by the test set-up).
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/tokenizer/tokenizer.h"

namespace encoder::tokenizer {
namespace {

using json = nlohmann::json;

std::string FixtureDir() {
  const char* dir = std::getenv("ENCODER_TOKENIZER_FIXTURES");
  return dir != nullptr ? dir : "";
}

// Byte offsets agree with the reference's code point offsets: a byte offset
// on a character boundary must be exactly that character's first byte (the
// reference reports character offsets only; a byte-level token may end
// inside a character, where only the character offsets can be compared).
bool ByteOffsetsAgree(const std::string& text, const std::vector<Offsets>& ours,
                      const json& offsets) {
  std::vector<int64_t> byte_at;  // byte index of each code point, then size
  for (size_t i = 0; i < text.size(); ++i) {
    if ((text[i] & 0xc0) != 0x80) byte_at.push_back(static_cast<int64_t>(i));
  }
  byte_at.push_back(static_cast<int64_t>(text.size()));
  auto boundary = [&text](int64_t b) {
    return b >= static_cast<int64_t>(text.size()) || (text[b] & 0xc0) != 0x80;
  };
  if (ours.size() != offsets.size()) return false;
  for (size_t k = 0; k < ours.size(); ++k) {
    const auto s = offsets[k][0].get<size_t>(), e = offsets[k][1].get<size_t>();
    if (s >= byte_at.size() || e >= byte_at.size()) return false;
    if (ours[k].start == ours[k].end && s == e) continue;
    if (boundary(ours[k].start) && ours[k].start != byte_at[s]) return false;
    if (boundary(ours[k].end) && ours[k].end != byte_at[e]) return false;
  }
  return true;
}

std::vector<Offsets> ToOffsets(const json& offsets) {
  std::vector<Offsets> out;
  for (const json& o : offsets)
    out.push_back({o[0].get<int64_t>(), o[1].get<int64_t>()});
  return out;
}

std::vector<int64_t> Mask(const Encoding& e) {
  return std::vector<int64_t>(e.special_tokens_mask.begin(),
                              e.special_tokens_mask.end());
}

struct Counts {
  int lines = 0, tokens = 0, decodes = 0, truncations = 0, mismatches = 0;
};

// Compares one expected record; returns false (and reports) on mismatch.
void CompareRecord(const Tokenizer& tok, const json& rec, bool big,
                   const std::string& where, Counts* n) {
  const std::string text = rec["text"].get<std::string>();
  auto e = tok.Encode(text, EncodeOptions{});
  ASSERT_TRUE(e.ok()) << where << ": " << e.status();
  const auto ids = rec["ids"].get<std::vector<int64_t>>();
  const bool same =
      e->ids == ids &&
      e->tokens == rec["tokens"].get<std::vector<std::string>>() &&
      e->char_offsets == ToOffsets(rec["offsets"]) &&
      ByteOffsetsAgree(text, e->byte_offsets, rec["offsets"]) &&
      Mask(*e) == rec["mask"].get<std::vector<int64_t>>() &&
      e->type_ids == rec["type_ids"].get<std::vector<int64_t>>();
  if (!same) {
    ++n->mismatches;
    size_t k = 0;
    while (k < e->ids.size() && k < ids.size() && e->ids[k] == ids[k] &&
           e->tokens[k] == rec["tokens"][k] &&
           e->char_offsets[k] == ToOffsets(rec["offsets"])[k]) {
      ++k;
    }
    ADD_FAILURE() << where << ": first difference at token " << k << " of "
                  << ids.size() << " (ours " << e->ids.size()
                  << ")\n  text: " << json(text.substr(0, 200)).dump()
                  << "\n  expected: "
                  << (k < ids.size() ? rec["tokens"][k].dump() + " id " +
                                           std::to_string(ids[k]) + " " +
                                           rec["offsets"][k].dump()
                                     : "end")
                  << "\n  ours:     "
                  << (k < e->ids.size()
                          ? json(e->tokens[k]).dump() + " id " +
                                std::to_string(e->ids[k]) + " [" +
                                std::to_string(e->char_offsets[k].start) + "," +
                                std::to_string(e->char_offsets[k].end) + "]"
                          : "end");
    return;
  }
  n->tokens += static_cast<int>(ids.size());
  ++n->lines;
  if (big) return;
  EncodeOptions plain;
  plain.add_special_tokens = false;
  auto p = tok.Encode(text, plain);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ids, rec["plain_ids"].get<std::vector<int64_t>>()) << where;
  EXPECT_EQ(p->char_offsets, ToOffsets(rec["plain_offsets"])) << where;
  auto decoded = tok.Decode(ids, false);
  auto skipped = tok.Decode(ids, true);
  ASSERT_TRUE(decoded.ok() && skipped.ok()) << where;
  EXPECT_EQ(*decoded, rec["decoded"].get<std::string>()) << where;
  EXPECT_EQ(*skipped, rec["decoded_skip"].get<std::string>()) << where;
  n->decodes += 2;
  for (const auto& [key, side] :
       {std::pair{"trunc_right", TruncationSide::kRight},
        std::pair{"trunc_left", TruncationSide::kLeft}}) {
    EncodeOptions t;
    t.truncate = true;
    t.max_length = 6;
    t.side = side;
    auto te = tok.Encode(text, t);
    ASSERT_TRUE(te.ok());
    EXPECT_EQ(te->ids, rec[key].get<std::vector<int64_t>>())
        << where << " " << key;
    ++n->truncations;
  }
}

class ReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTest, MatchesHuggingFaceTokenizers) {
  const std::string dir = FixtureDir() + "/" + GetParam();
  if (FixtureDir().empty()) GTEST_FAIL() << "ENCODER_TOKENIZER_FIXTURES unset";
  const auto t0 = std::chrono::steady_clock::now();
  auto tok = LoadTokenizerFromDirectory(dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  Counts n;
  for (const char* file : {"expected.jsonl", "expected_big.jsonl"}) {
    std::ifstream in(dir + "/" + file);
    ASSERT_TRUE(in) << dir << "/" << file;
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      const json rec = json::parse(line);
      CompareRecord(**tok, rec, std::string(file) == "expected_big.jsonl",
                    GetParam() + "/" + file + ":" + std::to_string(lineno), &n);
    }
  }
  std::cout << GetParam() << " (" << (*tok)->kind() << ", load " << load_s
            << " s): " << n.lines << " inputs identical (" << n.tokens
            << " tokens: ids, tokens, byte+char offsets, masks, type ids), "
            << n.decodes << " decodes, " << n.truncations
            << " truncations compared; " << n.mismatches << " inputs differ\n";
  EXPECT_EQ(n.mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, ReferenceTest,
    ::testing::Values("wordpiece_trained", "wordpiece_cased",
                      "wp_split_removed", "wp_split_previous", "wp_split_next",
                      "wp_split_inverted", "bpe_added_tokens",
                      "bpe_bytelevel_trained", "unigram_always",
                      "unigram_first", "unigram_never", "bert_vocab", "gpt2",
                      "llama3", "qwen3", "gemma3", "spm_nmt_nfkc",
                      "spm_nfkc_cf"));

}  // namespace
}  // namespace encoder::tokenizer

// Every fixture tokenizer against the Hugging Face tokenizers library: ids,
// tokens, byte and character offsets, special-token masks, type ids,
// encodings without special tokens, truncation on both sides and decoding,
// on every line of the hostile corpus and on a 1 MB input; and sentence
// pairs of those lines (sequence ids too, and longest_first truncation). The
// expected files come from tests/tokenizer/make_reference.js (run by the
// test set-up).
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
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

// Byte offsets of a pair agree with the reference's, each sequence's
// against its own text (special tokens go with the first).
bool PairByteOffsetsAgree(const std::string& a, const std::string& b,
                          const Encoding& e, const json& offsets) {
  if (e.sequence_ids.size() != e.size() || offsets.size() != e.size()) {
    return false;
  }
  std::vector<Offsets> ours[2];
  json theirs[2] = {json::array(), json::array()};
  for (size_t k = 0; k < e.size(); ++k) {
    const int s = e.sequence_ids[k] == 1 ? 1 : 0;
    ours[s].push_back(e.byte_offsets[k]);
    theirs[s].push_back(offsets[k]);
  }
  return ByteOffsetsAgree(a, ours[0], theirs[0]) &&
         ByteOffsetsAgree(b, ours[1], theirs[1]);
}

// The first list in which `e` differs from the reference's pair encoding
// `want`, with both versions; empty when they agree.
std::string PairDifference(const std::string& a, const std::string& b,
                           const Encoding& e, const json& want) {
  const std::vector<int64_t> sequence_ids(e.sequence_ids.begin(),
                                          e.sequence_ids.end());
  std::vector<std::vector<int64_t>> chars;
  for (const Offsets& o : e.char_offsets) chars.push_back({o.start, o.end});
  const std::pair<const char*, json> lists[] = {{"ids", e.ids},
                                                {"tokens", e.tokens},
                                                {"type_ids", e.type_ids},
                                                {"mask", Mask(e)},
                                                {"sequence_ids", sequence_ids},
                                                {"offsets", chars}};
  for (const auto& [key, ours] : lists) {
    if (ours != want[key]) {
      return std::string(key) + "\n  expected: " + want[key].dump() +
             "\n  ours:     " + ours.dump();
    }
  }
  if (!PairByteOffsetsAgree(a, b, e, want["offsets"])) {
    return "byte offsets disagree with " + want["offsets"].dump();
  }
  return "";
}

// The start of `text` as a JSON string (a cut character replaced).
std::string Printable(const std::string& text) {
  return json(text.substr(0, 120))
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

struct PairCounts {
  int pairs = 0, encodings = 0, tokens = 0, refusals = 0, mismatches = 0;
};

// EncodePair under `options` against `want`; reports the first few
// mismatches.
void ComparePair(const Tokenizer& tok, const std::string& a,
                 const std::string& b, const EncodeOptions& options,
                 const json& want, const std::string& where, PairCounts* n) {
  auto e = tok.EncodePair(a, b, options);
  ASSERT_TRUE(e.ok()) << where << ": " << e.status();
  const std::string diff = PairDifference(a, b, *e, want);
  ++n->encodings;
  n->tokens += static_cast<int>(e->size());
  if (diff.empty()) return;
  if (++n->mismatches <= 5) {
    ADD_FAILURE() << where << ": " << diff << "\n  first: " << Printable(a)
                  << "\n  second: " << Printable(b);
  }
}

// One line of expected_pairs.jsonl: the pair with and without special
// tokens, truncated to each max_length on each side, and refused with a
// max_length below its special tokens (the library then truncates nothing).
void ComparePairRecord(const Tokenizer& tok, const json& rec,
                       const std::string& where, PairCounts* n) {
  const std::string a = rec["a"].get<std::string>();
  const std::string b = rec["b"].get<std::string>();
  ComparePair(tok, a, b, EncodeOptions{}, rec, where, n);
  EncodeOptions plain;
  plain.add_special_tokens = false;
  ComparePair(tok, a, b, plain, rec["plain"], where + " plain", n);
  for (const json& t : rec["truncated"]) {
    EncodeOptions o;
    o.truncate = true;
    o.max_length = t["max_length"].get<int64_t>();
    o.side =
        t["side"] == "left" ? TruncationSide::kLeft : TruncationSide::kRight;
    std::ostringstream label;
    label << where << " max_length " << o.max_length << " " << t["side"];
    ComparePair(tok, a, b, o, t, label.str(), n);
  }
  const int64_t added = rec["added"].get<int64_t>();
  if (added == 0) return;
  EncodeOptions small;
  small.truncate = true;
  small.max_length = added - 1;
  auto refused = tok.EncodePair(a, b, small);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
      << where;
  ++n->refusals;
}

class PairReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PairReferenceTest, MatchesHuggingFaceTokenizers) {
  if (FixtureDir().empty()) GTEST_FAIL() << "ENCODER_TOKENIZER_FIXTURES unset";
  const std::string dir = FixtureDir() + "/" + GetParam();
  auto tok = LoadTokenizerFromDirectory(dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::ifstream in(dir + "/expected_pairs.jsonl");
  ASSERT_TRUE(in) << dir << "/expected_pairs.jsonl";
  PairCounts n;
  std::string line;
  while (std::getline(in, line)) {
    ++n.pairs;
    ComparePairRecord(
        **tok, json::parse(line),
        GetParam() + "/expected_pairs.jsonl:" + std::to_string(n.pairs), &n);
  }
  std::cout << GetParam() << ": " << n.pairs << " pairs, " << n.encodings
            << " pair encodings (" << n.tokens
            << " tokens: ids, tokens, type ids, masks, sequence ids, byte+char "
               "offsets; with and without special tokens, truncated), "
            << n.refusals << " too-small max_lengths refused; " << n.mismatches
            << " differ\n";
  EXPECT_GT(n.pairs, 0);
  EXPECT_EQ(n.mismatches, 0);
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

const auto kFixtures = ::testing::Values(
    "wordpiece_trained", "wordpiece_cased", "wp_split_removed",
    "wp_split_previous", "wp_split_next", "wp_split_inverted", "wp_bare",
    "bpe_added_tokens", "bpe_bytelevel_trained", "bpe_sequence",
    "unigram_always", "unigram_first", "unigram_never", "bert_vocab", "gpt2",
    "llama3", "qwen3", "gemma3", "spm_nmt_nfkc", "spm_nfkc_cf");

// Tests are named after their fixture (CTest runs each on its own).
std::string FixtureName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ReferenceTest, kFixtures, FixtureName);
INSTANTIATE_TEST_SUITE_P(Fixtures, PairReferenceTest, kFixtures, FixtureName);

}  // namespace
}  // namespace encoder::tokenizer

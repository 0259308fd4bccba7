// The SentencePiece character map reader: a hand-built double-array trie
// (keys "a" -> "b" and "ﬁ" -> "fi") checks lookups and alignments, and
// damaged maps must be InvalidArgument naming the problem, never a crash.
// The comparison with maps SentencePiece builds is in reference_test.cc.
#include "server/tokenizer/precompiled.h"

#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"

namespace encoder::tokenizer {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kLeafBit = 1u << 8;
constexpr uint32_t kLeafUnit = 1u << 31;

// A child unit: its label, whether a value hangs below it, and the offset
// (XORed into its position) to its own children and value.
uint32_t Node(uint8_t label, uint32_t offset, bool leaf) {
  return (offset << 10) | (leaf ? kLeafBit : 0) | label;
}

struct Map {
  std::vector<uint32_t> units = std::vector<uint32_t>(512, 0);
  std::string pool;
  std::string Blob() const {
    std::string out;
    auto put = [&out](uint32_t v) {
      for (int k = 0; k < 4; ++k) out.push_back(static_cast<char>(v >> 8 * k));
    };
    put(static_cast<uint32_t>(units.size() * 4));
    for (uint32_t u : units) put(u);
    return out + pool;
  }
};

// Root base 0. "a" (0x61) sits at unit 0x61, its value at 0x60 -> "b".
// "ﬁ" is EF AC 81: units 0xEF, then 0xEF^0x100^0xAC, then ... ^0x81.
Map TwoKeys() {
  Map m;
  m.pool = std::string("b\0fi\0", 5);
  m.units[0x61] = Node(0x61, 1, true);
  m.units[0x60] = kLeafUnit | 0;
  const uint32_t p1 = 0xEF, b1 = p1 ^ 0x100;
  const uint32_t p2 = b1 ^ 0xAC, b2 = p2 ^ 0x100;
  const uint32_t p3 = b2 ^ 0x81;
  m.units[p1] = Node(0xEF, 0x100, false);
  m.units[p2] = Node(0xAC, 0x100, false);
  m.units[p3] = Node(0x81, 1, true);
  m.units[p3 ^ 1] = kLeafUnit | 2;
  return m;
}

std::string Normalize(const Normalizer& n, const std::string& text,
                      std::vector<NormalizedString::Span>* spans) {
  NormalizedString s(text, 0);
  EXPECT_TRUE(n.Normalize(&s).ok());
  if (spans != nullptr) *spans = s.alignments();
  return s.get();
}

TEST(CharsMapTest, LooksUpKeysByPrefix) {
  auto map = CharsMap::Parse(TwoKeys().Blob());
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->Lookup("a"), "b");
  EXPECT_EQ(map->Lookup("abc"), "b");
  EXPECT_EQ(map->Lookup("\xEF\xAC\x81"), "fi");
  EXPECT_EQ(map->Lookup("x"), std::nullopt);
  EXPECT_EQ(map->Lookup("\xEF\xAC"), std::nullopt);
  EXPECT_EQ(map->Lookup(""), std::nullopt);
}

TEST(PrecompiledTest, ReplacesAndKeepsAlignments) {
  auto n = MakePrecompiledNormalizer(absl::Base64Escape(TwoKeys().Blob()));
  ASSERT_TRUE(n.ok()) << n.status();
  std::vector<NormalizedString::Span> spans;
  EXPECT_EQ(Normalize(**n, "xay", &spans), "xby");
  // "ﬁ" (3 bytes) becomes "fi": both letters point at the ligature.
  EXPECT_EQ(Normalize(**n, "\xEF\xAC\x81x", &spans), "fix");
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0], (NormalizedString::Span{0, 3}));
  EXPECT_EQ(spans[1], (NormalizedString::Span{0, 3}));
  EXPECT_EQ(spans[2], (NormalizedString::Span{3, 4}));
  // A grapheme under 6 bytes is looked up whole: "a" + U+0301 matches "a"
  // and the whole cluster becomes "b", as in the reference library.
  EXPECT_EQ(Normalize(**n, "a\xCC\x81z", nullptr), "bz");
  EXPECT_EQ(Normalize(**n, "", nullptr), "");
}

absl::Status Load(const std::string& blob) {
  return MakePrecompiledNormalizer(absl::Base64Escape(blob)).status();
}

void ExpectInvalid(const absl::Status& s, const std::string& what) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(what));
}

TEST(PrecompiledTest, RejectsDamagedMaps) {
  const std::string good = TwoKeys().Blob();
  ExpectInvalid(MakePrecompiledNormalizer("not base64!").status(), "base64");
  ExpectInvalid(Load("ab"), "4-byte header");
  ExpectInvalid(Load(good.substr(0, 100)), "truncated");
  std::string odd = good;
  odd[0] = 3;
  ExpectInvalid(Load(odd), "multiple of 4");
  ExpectInvalid(Load(std::string(4, '\0')), "multiple of 4");

  Map past_pool = TwoKeys();
  past_pool.units[0x60] = kLeafUnit | 999;
  ExpectInvalid(Load(past_pool.Blob()), "past the string pool");
  Map mid_char = TwoKeys();
  mid_char.pool = std::string("\xC3\xA9\0", 3);
  mid_char.units[0x60] = kLeafUnit | 1;
  ExpectInvalid(Load(mid_char.Blob()), "inside a UTF-8 character");
  Map leaf_outside = TwoKeys();
  leaf_outside.units[0x61] = Node(0x61, 0x7ff, true);
  ExpectInvalid(Load(leaf_outside.Blob()), "past the trie");
  Map bad_pool = TwoKeys();
  bad_pool.pool = std::string("b\0\xFF", 3);
  ExpectInvalid(Load(bad_pool.Blob()), "string pool");
}

TEST(PrecompiledTest, CyclicTrieLoadsAndEnds) {
  Map m = TwoKeys();
  m.units[0x62] = Node(0x62, 0x62, false);  // "b" leads back to the root
  auto map = CharsMap::Parse(m.Blob());
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->Lookup("bbbba"), "b");
  EXPECT_EQ(map->Lookup(std::string(10000, 'b')), std::nullopt);
}

// Random byte damage: every result is OK or InvalidArgument, and a map that
// loads normalizes text without leaving its buffers.
TEST(PrecompiledTest, RandomDamageNeverCrashes) {
  const std::string good = TwoKeys().Blob();
  std::mt19937 rng(7);
  int loaded = 0, rejected = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string blob = good;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < edits; ++k) {
      blob[rng() % blob.size()] = static_cast<char>(rng());
    }
    if (rng() % 4 == 0) blob.resize(rng() % blob.size());
    auto n = MakePrecompiledNormalizer(absl::Base64Escape(blob));
    if (!n.ok()) {
      EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
      ++rejected;
      continue;
    }
    ++loaded;
    NormalizedString s(
        "a\xEF\xAC\x81 b\xCC\x81 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", 0);
    EXPECT_TRUE((*n)->Normalize(&s).ok());
  }
  std::cout << "damaged maps: " << loaded << " loaded, " << rejected
            << " rejected\n";
  EXPECT_GT(rejected, 0);
}

TEST(PrecompiledTest, TokenizerJsonFieldIsRequired) {
  for (const char* text :
       {R"({"type": "Precompiled"})",
        R"({"type": "Precompiled", "precompiled_charsmap": 12})"}) {
    auto n = MakeNormalizer(nlohmann::json::parse(text));
    ExpectInvalid(n.status(), "precompiled_charsmap");
  }
}

}  // namespace
}  // namespace encoder::tokenizer

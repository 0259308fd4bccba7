#include "server/tokenizer/byte_tokenizer.h"

#include <gtest/gtest.h>

namespace encoder::tokenizer {
namespace {

TEST(ByteTokenizer, BytesAreShiftedAndFramed) {
  auto ids = ByteTokenizer::Encode("Hé", 10000);
  ASSERT_TRUE(ids.ok());
  // 'H' = 0x48, 'é' = 0xc3 0xa9 in UTF-8.
  const std::vector<int64_t> want = {1, 4 + 0x48, 4 + 0xc3, 4 + 0xa9, 2};
  EXPECT_EQ(*ids, want);
  EXPECT_EQ(ByteTokenizer::IdLabel(1), "[CLS]");
  EXPECT_EQ(ByteTokenizer::IdLabel(4 + 'a'), "a");
  EXPECT_EQ(ByteTokenizer::IdLabel(4 + 0xc3), "\\xc3");
  auto small = ByteTokenizer::Encode("x", 100);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(std::string(small.status().message()).find("260"),
            std::string::npos);
}

TEST(ByteTokenizer, InterfaceGivesTheSameIdsWithOffsets) {
  ByteTokenizer tok(10000);
  auto e = tok.Encode("Hé", EncodeOptions{});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->ids, (std::vector<int64_t>{1, 4 + 0x48, 4 + 0xc3, 4 + 0xa9, 2}));
  EXPECT_EQ(e->byte_offsets[2], (Offsets{1, 2}));
  EXPECT_EQ(e->char_offsets[3], (Offsets{1, 2}));  // second byte of 'é'
  EXPECT_EQ(e->special_tokens_mask, (std::vector<uint8_t>{1, 0, 0, 0, 1}));
  EXPECT_EQ(tok.kind(), "byte");
  auto text = tok.Decode(e->ids, true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "Hé");
}

TEST(ByteTokenizer, TruncationKeepsTheFrame) {
  ByteTokenizer tok(10000);
  EncodeOptions o;
  o.truncate = true;
  o.max_length = 4;
  auto right = tok.Encode("abcdef", o);
  ASSERT_TRUE(right.ok());
  EXPECT_EQ(right->ids, (std::vector<int64_t>{1, 4 + 'a', 4 + 'b', 2}));
  o.side = TruncationSide::kLeft;
  auto left = tok.Encode("abcdef", o);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->ids, (std::vector<int64_t>{1, 4 + 'e', 4 + 'f', 2}));
  o.add_special_tokens = false;
  auto bare = tok.Encode("abcdef", o);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->ids,
            (std::vector<int64_t>{4 + 'c', 4 + 'd', 4 + 'e', 4 + 'f'}));
}

TEST(ByteTokenizer, PairIsFramedAsBert) {
  ByteTokenizer tok(10000);
  auto e = tok.EncodePair("ab", "é", EncodeOptions{});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->ids, (std::vector<int64_t>{1, 4 + 'a', 4 + 'b', 2, 4 + 0xc3,
                                          4 + 0xa9, 2}));
  EXPECT_EQ(e->tokens, (std::vector<std::string>{"[CLS]", "a", "b", "[SEP]",
                                                 "\\xc3", "\\xa9", "[SEP]"}));
  EXPECT_EQ(e->type_ids, (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(e->special_tokens_mask,
            (std::vector<uint8_t>{1, 0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(e->sequence_ids, (std::vector<int8_t>{-1, 0, 0, -1, 1, 1, -1}));
  // Offsets index each token's own text.
  EXPECT_EQ(e->byte_offsets,
            (std::vector<Offsets>{
                {0, 0}, {0, 1}, {1, 2}, {0, 0}, {0, 1}, {1, 2}, {0, 0}}));
  EXPECT_EQ(e->char_offsets,
            (std::vector<Offsets>{
                {0, 0}, {0, 1}, {1, 2}, {0, 0}, {0, 1}, {0, 1}, {0, 0}}));
  EncodeOptions bare;
  bare.add_special_tokens = false;
  auto plain = tok.EncodePair("ab", "", bare);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->ids, (std::vector<int64_t>{4 + 'a', 4 + 'b'}));
  EXPECT_EQ(plain->sequence_ids, (std::vector<int8_t>{0, 0}));
  auto empty = tok.EncodePair("", "", EncodeOptions{});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->ids, (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(empty->type_ids, (std::vector<int64_t>{0, 0, 1}));
  // Single encodings leave sequence ids empty.
  EXPECT_TRUE(tok.Encode("ab", EncodeOptions{})->sequence_ids.empty());
}

// longest_first as the tokenizers library does it: the longer text gives
// up tokens first; when both must, each keeps half, the longer text the
// odd token.
TEST(ByteTokenizer, PairTruncationIsLongestFirst) {
  ByteTokenizer tok(10000);
  EncodeOptions o;
  o.truncate = true;
  auto ids = [&](std::string_view a, std::string_view b) {
    auto e = tok.EncodePair(a, b, o);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? e->ids : std::vector<int64_t>{};
  };
  const auto b = [](char c) { return int64_t{4} + c; };
  o.max_length = 3 + 5;  // three special tokens
  EXPECT_EQ(
      ids("ab", "cdefgh"),
      (std::vector<int64_t>{1, b('a'), b('b'), 2, b('c'), b('d'), b('e'), 2}));
  EXPECT_EQ(
      ids("abcdef", "gh"),
      (std::vector<int64_t>{1, b('a'), b('b'), b('c'), 2, b('g'), b('h'), 2}));
  EXPECT_EQ(
      ids("abcd", "efgh"),
      (std::vector<int64_t>{1, b('a'), b('b'), 2, b('e'), b('f'), b('g'), 2}));
  o.side = TruncationSide::kLeft;
  EXPECT_EQ(
      ids("abcd", "efgh"),
      (std::vector<int64_t>{1, b('c'), b('d'), 2, b('f'), b('g'), b('h'), 2}));
  o.max_length = 3;  // the special tokens alone
  EXPECT_EQ(ids("abcd", "efgh"), (std::vector<int64_t>{1, 2, 2}));
  o.add_special_tokens = false;
  o.max_length = 2;
  EXPECT_EQ(ids("abcd", "efgh"), (std::vector<int64_t>{b('d'), b('h')}));
}

TEST(ByteTokenizer, PairMaxLengthBelowTheSpecialTokensIsInvalidArgument) {
  ByteTokenizer tok(10000);
  EncodeOptions o;
  o.truncate = true;
  o.max_length = 2;
  auto e = tok.EncodePair("abc", "def", o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(e.status().message()).find("max_length 2"),
            std::string::npos)
      << e.status();
  EXPECT_NE(std::string(e.status().message()).find("3 special tokens"),
            std::string::npos)
      << e.status();
  auto bad = tok.EncodePair("ok", "ab\xff", EncodeOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ByteTokenizer, InvalidUtf8NamesTheByteOffset) {
  ByteTokenizer tok(10000);
  auto e = tok.Encode("ab\xff", EncodeOptions{});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(e.status().message()).find("byte offset 2"),
            std::string::npos)
      << e.status();
  auto d = tok.Decode({1, 99999}, false);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace encoder::tokenizer

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

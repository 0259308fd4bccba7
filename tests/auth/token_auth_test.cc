// Bearer tokens: file parsing, the header check, rotation and reload.
#include "server/auth/token_auth.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace encoder::auth {
namespace {

TEST(ParseTokensTest, OneTokenPerLineSkippingBlanksAndComments) {
  auto tokens = ParseTokens("# rotated 2026-11\n  alpha-1 \n\nbeta_2\r\n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, (std::vector<std::string>{"alpha-1", "beta_2"}));
}

TEST(ParseTokensTest, RefusesEmptyFilesAndInnerBlanks) {
  EXPECT_EQ(ParseTokens("").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseTokens("# only a comment\n\n").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto inner = ParseTokens("good\nbad token\n");
  EXPECT_EQ(inner.status().code(), absl::StatusCode::kInvalidArgument);
  // The message names the line, never the token.
  EXPECT_NE(inner.status().message().find("line 2"), std::string::npos);
  EXPECT_EQ(inner.status().message().find("bad"), std::string::npos);
}

TEST(MatchesAnyTokenTest, ExactMatchOnly) {
  const std::vector<std::string> tokens = {"s3cret", "other-key"};
  EXPECT_TRUE(MatchesAnyToken("s3cret", tokens));
  EXPECT_TRUE(MatchesAnyToken("other-key", tokens));
  EXPECT_FALSE(MatchesAnyToken("s3cre", tokens));    // prefix
  EXPECT_FALSE(MatchesAnyToken("s3cret1", tokens));  // longer
  EXPECT_FALSE(MatchesAnyToken("s3cres3cret", tokens));
  EXPECT_FALSE(MatchesAnyToken("S3CRET", tokens));  // case matters
  EXPECT_FALSE(MatchesAnyToken("", tokens));
  EXPECT_FALSE(MatchesAnyToken("", {""}));
  // A presented value that repeats a token (the comparison wraps around
  // the token) is still a mismatch.
  EXPECT_FALSE(MatchesAnyToken("abab", {"ab"}));
}

TEST(TokenAuthenticatorTest, ChecksTheBearerHeader) {
  TokenAuthenticator auth({"k1", "k2"});
  EXPECT_EQ(auth.Check({}), AuthResult::kMissing);
  EXPECT_EQ(auth.Check({"Bearer k1"}), AuthResult::kOk);
  EXPECT_EQ(auth.Check({"bearer k2"}), AuthResult::kOk);
  EXPECT_EQ(auth.Check({"BEARER  k2 "}), AuthResult::kOk);
  EXPECT_EQ(auth.Check({"Bearer k3"}), AuthResult::kInvalid);
  EXPECT_EQ(auth.Check({"Basic k1"}), AuthResult::kInvalid);
  EXPECT_EQ(auth.Check({"k1"}), AuthResult::kInvalid);
  EXPECT_EQ(auth.Check({"Bearer "}), AuthResult::kInvalid);
  EXPECT_EQ(auth.Check({"Bearer bad", "Bearer k1"}), AuthResult::kOk);
}

TEST(TokenAuthenticatorTest, ReloadRotatesAndKeepsOldTokensOnError) {
  const std::string path = ::testing::TempDir() + "/token_auth_test_tokens.txt";
  { std::ofstream(path) << "old\n"; }
  auto auth = TokenAuthenticator::FromFile(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ((*auth)->Check({"Bearer old"}), AuthResult::kOk);
  { std::ofstream(path) << "old\nnew\n"; }  // rotation: both accepted
  ASSERT_TRUE((*auth)->Reload().ok());
  EXPECT_EQ((*auth)->token_count(), 2u);
  EXPECT_EQ((*auth)->Check({"Bearer new"}), AuthResult::kOk);
  { std::ofstream(path) << "new\n"; }  // the old token retired
  ASSERT_TRUE((*auth)->Reload().ok());
  EXPECT_EQ((*auth)->Check({"Bearer old"}), AuthResult::kInvalid);
  { std::ofstream(path) << "\n"; }  // a broken file changes nothing
  EXPECT_FALSE((*auth)->Reload().ok());
  EXPECT_EQ((*auth)->Check({"Bearer new"}), AuthResult::kOk);
  std::remove(path.c_str());
  EXPECT_EQ(TokenAuthenticator::FromFile(path).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace encoder::auth

#include "server/common/status_macros.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace {

// Counts how often the wrapped expression runs: each macro must evaluate it
// exactly once.
int calls = 0;

absl::Status Check(bool ok) {
  ++calls;
  return ok ? absl::OkStatus() : absl::NotFoundError("no such thing");
}

absl::StatusOr<std::unique_ptr<int>> Make(int v) {
  ++calls;
  if (v < 0) return absl::InvalidArgumentError("negative");
  return std::make_unique<int>(v);
}

absl::Status TwoChecks(bool first, bool second, int* reached) {
  RETURN_IF_ERROR(Check(first));
  *reached = 1;
  RETURN_IF_ERROR(Check(second));
  *reached = 2;
  return absl::OkStatus();
}

// Declares a new variable; the value is moved out (unique_ptr: move-only).
absl::StatusOr<int> Doubled(int v) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> p, Make(v));
  return *p * 2;
}

// Assigns to an existing variable, twice in one scope.
absl::Status Sum(int a, int b, int* out) {
  std::unique_ptr<int> x;
  ASSIGN_OR_RETURN(x, Make(a));
  ASSIGN_OR_RETURN(auto y, Make(b));
  *out = *x + *y;
  return absl::OkStatus();
}

TEST(StatusMacros, ReturnIfErrorPassesOkThrough) {
  calls = 0;
  int reached = 0;
  EXPECT_TRUE(TwoChecks(true, true, &reached).ok());
  EXPECT_EQ(reached, 2);
  EXPECT_EQ(calls, 2);
}

TEST(StatusMacros, ReturnIfErrorReturnsTheFirstErrorUnchanged) {
  calls = 0;
  int reached = 0;
  absl::Status s = TwoChecks(false, true, &reached);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no such thing");
  EXPECT_EQ(reached, 0);
  EXPECT_EQ(calls, 1);  // the second check never ran

  calls = 0;
  s = TwoChecks(true, false, &reached);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reached, 1);
  EXPECT_EQ(calls, 2);
}

TEST(StatusMacros, AssignOrReturnDeclaresAndMoves) {
  calls = 0;
  absl::StatusOr<int> d = Doubled(21);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, 42);
  EXPECT_EQ(calls, 1);
}

TEST(StatusMacros, AssignOrReturnPropagatesTheError) {
  calls = 0;
  absl::StatusOr<int> d = Doubled(-1);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d.status().message(), "negative");
  EXPECT_EQ(calls, 1);
}

TEST(StatusMacros, AssignOrReturnTwiceInOneScope) {
  int out = 0;
  EXPECT_TRUE(Sum(3, 4, &out).ok());
  EXPECT_EQ(out, 7);
  out = 0;
  calls = 0;
  absl::Status s = Sum(3, -4, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out, 0);
  EXPECT_EQ(calls, 2);
  calls = 0;
  s = Sum(-3, 4, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 1);  // stopped before the second call
}

}  // namespace

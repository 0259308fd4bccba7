// What an input past its model's length gets, and the one table of the
// policies' names (flags, repository entries, HTTP fields, ListModels).
// Plain C++: usable in every layer.
#ifndef ENCODER_SERVER_COMMON_LONG_INPUT_POLICY_H_
#define ENCODER_SERVER_COMMON_LONG_INPUT_POLICY_H_

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace encoder {

enum class LongInputPolicy {
  kRefuse,       // INVALID_ARGUMENT naming the length and the limit
  kTruncate,     // cut to the model's length (the cut tokens are counted)
  kChunk,        // windows of the model's length, their vectors aggregated
  kLateChunk,    // run whole, the windows pooled from the full context
  kExtrapolate,  // run whole past the model's length, where the scheme can
  kAuto,         // a default only: extrapolate or chunk by the scheme
};

// The pooled drift past a model's length up to which the policy auto runs
// inputs whole, as measured at load (--long-input-drift).
inline constexpr double kDefaultLongInputDrift = 0.05;

inline constexpr std::array<std::pair<LongInputPolicy, std::string_view>, 6>
    kLongInputPolicyNames = {{{LongInputPolicy::kRefuse, "refuse"},
                              {LongInputPolicy::kTruncate, "truncate"},
                              {LongInputPolicy::kChunk, "chunk"},
                              {LongInputPolicy::kLateChunk, "late_chunk"},
                              {LongInputPolicy::kExtrapolate, "extrapolate"},
                              {LongInputPolicy::kAuto, "auto"}}};

inline std::string_view LongInputPolicyName(LongInputPolicy policy) {
  for (const auto& [p, name] : kLongInputPolicyNames) {
    if (p == policy) return name;
  }
  return "?";
}

inline std::optional<LongInputPolicy> ParseLongInputPolicy(
    std::string_view name) {
  for (const auto& [p, n] : kLongInputPolicyNames) {
    if (n == name) return p;
  }
  return std::nullopt;
}

// What a request's boolean `truncate` field names (TEI's and EmbedSparse's,
// Embed's beside long_input): true truncates, false refuses; unset, the
// model's default.
inline std::optional<LongInputPolicy> TruncatePolicy(
    std::optional<bool> truncate) {
  if (!truncate.has_value()) return std::nullopt;
  return *truncate ? LongInputPolicy::kTruncate : LongInputPolicy::kRefuse;
}

// The names, in the table's order; without "auto" when `with_auto` is
// false (a request names what to do, not a default to resolve).
inline std::vector<std::string> LongInputPolicyNames(bool with_auto = true) {
  std::vector<std::string> names;
  for (const auto& [p, n] : kLongInputPolicyNames) {
    if (with_auto || p != LongInputPolicy::kAuto) names.emplace_back(n);
  }
  return names;
}

// "refuse, truncate, chunk, late_chunk, extrapolate, auto", for messages.
inline std::string LongInputPolicyList(bool with_auto = true) {
  std::string out;
  for (const std::string& n : LongInputPolicyNames(with_auto)) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

}  // namespace encoder

#endif  // ENCODER_SERVER_COMMON_LONG_INPUT_POLICY_H_

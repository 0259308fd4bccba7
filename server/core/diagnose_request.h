// Diagnose, validated in the core: the request as every front reads it
// (plain C++: the fields of the gRPC DiagnoseRequest), its limits, and the
// probes' options built from it once the model is known.
#ifndef ENCODER_SERVER_CORE_DIAGNOSE_REQUEST_H_
#define ENCODER_SERVER_CORE_DIAGNOSE_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/api/diagnose_report.h"
#include "server/api/served_model.h"
#include "server/core/embed_request.h"
#include "server/core/text_input.h"

namespace encoder::core {

struct DiagnoseLimits {
  int64_t max_tokens = 512;               // input length for Diagnose
  int64_t max_structure_positions = 512;  // N of Gram / bias matrices
  // Diagnose calls waiting or running, across models
  // (--max-pending-diagnose).
  int64_t max_pending = 16;
  // Longest input of the extrapolation probe (a repository entry may set
  // its own).
  int64_t max_extrapolation_tokens = kDefaultMaxExtrapolationTokens;
};

// The extrapolation probe's longest input for `model`: its repository
// entry's, else the server's.
int64_t MaxExtrapolationTokens(const api::ServedModel& model,
                               const DiagnoseLimits& limits);

// The largest |shift_offset| Diagnose accepts. Positions stay far from
// int64 overflow, and float32 codes keep their precision well past it.
inline constexpr int64_t kMaxShiftOffset = int64_t{1} << 20;
// Defaults of an empty extrapolation grid.
inline constexpr int32_t kDefaultExtrapolationPoints = 6;
inline constexpr double kDefaultExtrapolationMultiple = 2.0;
inline constexpr double kMaxExtrapolationMultiple = 64.0;
inline constexpr int64_t kDefaultExtrapolationPrefix = 8;

// One Diagnose call. Zero values mean "the server's default", as in the
// gRPC message (encoder.proto, DiagnoseRequest).
struct DiagnoseQuery {
  enum class Input { kNone, kTokenIds, kText, kRandom };
  Input input = Input::kNone;
  std::vector<int64_t> token_ids;  // kTokenIds
  std::string text;                // kText, with text_options
  TextOptions text_options;
  int64_t random_length = 0;  // kRandom: ids drawn with random_seed
  uint64_t random_seed = 0;
  // Probes to run; none set: all of them but extrapolation.
  bool permutation = false;
  bool shift = false;
  bool structure = false;
  bool attention_stats = false;
  bool extrapolation = false;
  bool return_attention_maps = false;
  std::vector<int64_t> permutation_order;  // empty: a seeded random one
  uint64_t permutation_seed = 0;
  int64_t shift_offset = 0;         // 0: the probe's default
  int64_t structure_positions = 0;  // 0: min(64, the limit)
  double tolerance = 0;             // 0: the probe's default
  // The extrapolation grid: `lengths`, or `points` lengths up to
  // max_multiple times the trained length.
  std::vector<int64_t> extrapolation_lengths;
  double extrapolation_max_multiple = 0;
  int64_t extrapolation_points = 0;
  int64_t extrapolation_prefix_length = 0;
};

// INVALID_ARGUMENT for no input or empty text, ids outside the vocabulary,
// inputs longer than limits.max_tokens or the model's limit, a bad
// permutation length, a shift_offset beyond kMaxShiftOffset, a tolerance
// that is negative or not finite, structure_positions over
// limits.max_structure_positions, or a bad extrapolation grid (not
// strictly increasing, a length over the model's limit, too many points, a
// bad max_multiple or prefix_length). Messages name the limit.
absl::StatusOr<api::DiagnoseOptions> BuildDiagnoseOptions(
    const DiagnoseQuery& query, const api::ServedModel& model,
    const DiagnoseLimits& limits);

// The lengths of an empty grid: `points` lengths spaced geometrically from
// trained/8 to multiple * trained, rounded, those over `limit` replaced by
// `limit`, duplicates dropped.
std::vector<int64_t> DefaultGrid(int64_t trained, double multiple,
                                 int32_t points, int64_t limit);

// `n` ids drawn uniformly from [0, vocab) by a generator seeded with
// `seed`: a longer draw with the same seed starts with the shorter one's
// ids (the extrapolation probe's longest input extends the base input).
std::vector<int64_t> SeededRandomIds(int64_t n, uint64_t seed, int64_t vocab);

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_DIAGNOSE_REQUEST_H_

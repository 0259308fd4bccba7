// What the positional diagnostics take and return: plain C++ types (no
// LibTorch), so that the layers above them (the model handle, the RPC
// edge) need not include the model. The probes themselves are in
// diagnostics.h and extrapolation.h.
#ifndef ENCODER_SERVER_API_DIAGNOSE_REPORT_H_
#define ENCODER_SERVER_API_DIAGNOSE_REPORT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "server/common/attention_stats.h"
#include "server/model/positional/reach.h"

namespace encoder::api {

// A dense row-major array; an empty shape means absent.
template <typename T>
struct DenseArray {
  std::vector<int64_t> shape;
  std::vector<T> values;

  bool present() const { return !shape.empty(); }
};

// The most lengths one extrapolation probe runs.
inline constexpr int64_t kMaxExtrapolationLengths = 32;

struct ExtrapolationOptions {
  // The input at length L is source[i mod n] for i = 0..L-1, so a shorter
  // input is a prefix of every longer one.
  std::vector<int64_t> source;
  std::vector<int64_t> lengths;  // strictly increasing, >= 1
  // Tokens 0..prefix_length-1 are compared across lengths; must not exceed
  // lengths[0].
  int64_t prefix_length = 1;
  // Checked before each length; true stops the probe with Cancelled.
  std::function<bool()> is_cancelled;
};

// The measurements at one length. Per-layer values are means over heads of
// the per-head statistics (docs/positional-encodings.md#attention-statistics).
struct LengthPoint {
  int64_t length = 0;
  bool ran = false;
  std::string skipped_reason;            // why not, when !ran
  std::vector<double> entropy;           // per layer, nats
  std::vector<double> relative_entropy;  // entropy / ln L (0 for L = 1)
  std::vector<double> mean_distance;     // per layer
  std::vector<double> first_mass;        // per layer: mass on token 0
  // |mean_pool(L) - mean_pool(L0)| / |mean_pool(L0)|, L0 the shortest
  // length that ran.
  double pooled_drift = 0;
  // Mean over the prefix tokens t of |h_L(t) - h_L0(t)| / |h_L0(t)|.
  double prefix_drift = 0;
  // Rotary and sinusoidal: how many frequency pairs have a wavelength
  // shorter than L (their angle turns at least once within the input).
  int64_t wrapped_pairs = 0;
};

struct ExtrapolationResult {
  model::SchemeReach reach;
  int64_t prefix_length = 0;
  int64_t reference_length = 0;  // L0 (0 when no length ran)
  std::vector<LengthPoint> points;
};

// InvalidArgument for an empty source, a bad grid or prefix length. Lengths
// the scheme cannot represent (past a learned table) are reported with
// ran = false instead of running. Runs the longest length with every
// layer's attention kept: the caller prices and admits that.
struct DiagnoseOptions {
  std::vector<int64_t> token_ids;  // the input (already validated)
  bool permutation = true;
  bool shift = true;
  bool structure = true;
  bool attention_stats = true;
  bool return_attention_maps = false;
  std::vector<int64_t> permutation_order;  // empty: seeded random
  uint64_t permutation_seed = 0;
  int64_t shift_offset = 7;
  int64_t structure_positions = 64;
  // Tolerances for the verdicts; <= 0: defaults (1e-5; rope shift 1e-4).
  double tolerance = 0;
  // Runs the extrapolation probe when set (its own source and grid).
  std::optional<ExtrapolationOptions> extrapolation;
};

struct PermutationResult {
  std::vector<int64_t> order;
  double max_token_error = 0;   // max |f(Px) - P f(x)|
  double max_pooled_error = 0;  // mean pooling
  double tolerance = 0;
  bool equivariant = false;
  std::string verdict;
};

struct ShiftResult {
  int64_t offset = 0;
  double max_token_error = 0;
  double max_pooled_error = 0;
  double tolerance = 0;
  bool relative_only = false;
  std::string verdict;
};

struct StructureResult {
  std::string kind;  // additive | rotary | bias | none
  int64_t positions = 0;
  DenseArray<double> gram;  // [N, N] (additive)
  double toeplitz_deviation = 0;
  std::vector<double> similarity_by_distance;  // k = 0..N-1
  double min_code_distance = 0;
  std::vector<int64_t> shift_ks;
  std::vector<double> shift_residuals;
  DenseArray<double> relativity;  // [N, N] (rotary)
  double relativity_deviation = 0;
  double norm_ratio_deviation = 0;
  DenseArray<double> bias;  // [H, N, N] (bias)
  std::vector<double> slopes;
  bool symmetric = false;
  double symmetry_deviation = 0;
  bool toeplitz = false;
};

struct DiagnoseReport {
  std::optional<PermutationResult> permutation;
  std::optional<ShiftResult> shift;
  std::optional<StructureResult> structure;
  std::vector<AttentionHeadStats> attention_stats;  // layer-major
  double uniform_entropy = 0;                       // ln S
  DenseArray<float> attention_maps;                 // [L, H, S, S], if asked
  std::optional<ExtrapolationResult> extrapolation;
};

}  // namespace encoder::api

#endif  // ENCODER_SERVER_API_DIAGNOSE_REPORT_H_

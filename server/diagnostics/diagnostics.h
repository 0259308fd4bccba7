// Positional diagnostics: probes that run a model and measure how it uses
// position (docs/positional-encodings.md#diagnostics). LibTorch only; no
// RPC types.
#ifndef ENCODER_SERVER_DIAGNOSTICS_DIAGNOSTICS_H_
#define ENCODER_SERVER_DIAGNOSTICS_DIAGNOSTICS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/api/diagnose_report.h"
#include "server/common/attention_stats.h"
#include "server/diagnostics/extrapolation.h"
#include "server/model/encoder.h"

namespace encoder::diagnostics {

// probs: [heads, S, S] probabilities of one sequence, real tokens only (no
// padding rows or columns), any floating dtype and device. Returns one entry
// per head, computed in float64. Throws c10::Error for any other shape.
std::vector<AttentionHeadStats> ComputeHeadStats(const at::Tensor& probs,
                                                 int64_t layer);

// A CPU copy of `t` as float64 (double) or float32 (float).
template <typename T>
api::DenseArray<T> ToDense(const at::Tensor& t);

// Runs the requested probes on `model` (a const, thread-safe encoder).
// InvalidArgument for a bad permutation (not a permutation of 0..S-1) or
// bad sizes; Internal for library failures.
absl::StatusOr<api::DiagnoseReport> Diagnose(
    const model::Encoder& model, const api::DiagnoseOptions& options);

}  // namespace encoder::diagnostics

#endif  // ENCODER_SERVER_DIAGNOSTICS_DIAGNOSTICS_H_

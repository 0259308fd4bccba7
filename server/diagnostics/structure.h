// Positional structure probes: what a scheme's codes, rotations or biases
// look like over positions 0..N-1
// (docs/positional-encodings.md#positional-structure).
// Internal to the diagnostics library. All results are float64 on the CPU.
#ifndef ENCODER_SERVER_DIAGNOSTICS_STRUCTURE_H_
#define ENCODER_SERVER_DIAGNOSTICS_STRUCTURE_H_

#include <cstdint>

#include "server/diagnostics/diagnostics.h"
#include "server/model/encoder.h"

namespace encoder::diagnostics {

// Tolerance for the exact (float64) structure verdicts: symmetric, Toeplitz.
inline constexpr double kExactTolerance = 1e-9;

// Structure computed in the model's own floating type (disentangled
// attention's position terms, which use its weights): the verdicts allow
// this many units of that type's epsilon, scaled by max(1, the largest
// |value|). Equal products may round differently where a BLAS kernel
// handles the rows at a tile's edge on its own path.
inline constexpr double kRoundingUlps = 16;

// Dispatches on the scheme kind; `positions` is N >= 2. Throws c10::Error on
// library failures.
api::StructureResult AnalyzeStructure(const model::Encoder& model,
                                      int64_t positions);

// Additive schemes (sinusoidal, learned): Gram matrix of the codes, its
// Toeplitz deviation and decay by distance, code uniqueness and the residual
// of PE(p+k) = M_k PE(p). For learned, N is capped at the table size and
// p counts from the model's first position id (padding_idx + 1 for RoBERTa
// and MPNet), so row 0 of the matrices is the first token's code.
api::StructureResult AnalyzeAdditive(const model::Encoder& model,
                                     int64_t positions);

}  // namespace encoder::diagnostics

#endif  // ENCODER_SERVER_DIAGNOSTICS_STRUCTURE_H_

// The front-neutral Embed: plain C++ types in (EmbedQuery) and out
// (EmbedAnswer). Each front maps its own request (a protobuf message,
// OpenAI's JSON) into an EmbedQuery and an EmbedAnswer back into its own
// response; nothing else crosses the edge. PrepareEmbed turns a query into
// validated, priced batcher work: every check that can fail a request
// happens there, before any compute.
#ifndef ENCODER_SERVER_CORE_EMBED_REQUEST_H_
#define ENCODER_SERVER_CORE_EMBED_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/api/embed_types.h"
#include "server/api/served_model.h"
#include "server/common/long_input_policy.h"
#include "server/core/text_input.h"
#include "server/core/unread_responses.h"
#include "server/model/config.h"

namespace encoder::core {

// The defaults of --max-inputs-per-request and --max-send-message-bytes.
inline constexpr int64_t kDefaultMaxInputsPerRequest = 256;
inline constexpr int64_t kDefaultMaxSendMessageBytes = int64_t{64} << 20;

// The default of --max-extrapolation-tokens.
inline constexpr int64_t kDefaultMaxExtrapolationTokens = 2048;

struct ServiceLimits {
  int64_t max_inputs_per_request = kDefaultMaxInputsPerRequest;
  // Texts per Tokenize call, id lists per Decode call, on every front
  // (--max-tokenize-texts-per-request).
  int64_t max_tokenize_texts_per_request = 1024;
  // The largest response a front may send; Embed calls whose response is
  // estimated above it are refused before they run.
  int64_t max_send_message_bytes = kDefaultMaxSendMessageBytes;
  // Responses produced and not yet read, per connection and in total.
  UnreadLimits unread;
  // Windows one chunked input may become (--max-chunks-per-input).
  int64_t max_chunks_per_input = 64;
  // Longest input an extrapolating request may run, unless the model's
  // repository entry sets its own (--max-extrapolation-tokens). The core
  // takes it from DiagnoseLimits, where the flag sets it (the probe and
  // the extrapolate policy share one bound).
  int64_t max_extrapolation_tokens = kDefaultMaxExtrapolationTokens;
  // What an input past its model's length gets when the request names no
  // policy and the model's repository entry none either (--long-input);
  // auto is resolved by the scheme (DefaultLongInput). Truncate, as
  // text-embeddings-inference's --auto-truncate.
  LongInputPolicy long_input = LongInputPolicy::kTruncate;
};

// One input: text (tokenized with the model's tokenizer, after the prompt)
// or token ids as they are. kNone is an input that set neither.
struct EmbedInput {
  enum class Kind { kNone, kText, kTokenIds };
  Kind kind = Kind::kNone;
  std::string text;
  std::vector<int64_t> token_ids;

  static EmbedInput Text(std::string text) {
    EmbedInput in;
    in.kind = Kind::kText;
    in.text = std::move(text);
    return in;
  }
  static EmbedInput Ids(std::vector<int64_t> ids) {
    EmbedInput in;
    in.kind = Kind::kTokenIds;
    in.token_ids = std::move(ids);
    return in;
  }
};

// What an Embed call asks for; every field but `inputs` has a default.
struct EmbedQuery {
  std::string model;       // empty: the default model
  std::string request_id;  // echoed in the answer
  std::vector<EmbedInput> inputs;
  std::optional<model::Pooling> pooling;  // unset: the model's
  std::optional<bool> normalize;          // unset: the model's
  // What inputs past the model's length get (LongInputPolicy; not auto):
  // truncate, refuse (INVALID_ARGUMENT), chunk (windows of the model's
  // length, their pooled vectors aggregated: weighted by each window's
  // input tokens, or element-wise max with chunk_max; pooled embeddings
  // only, no prompt), late_chunk (run whole, extrapolating past the
  // model's length where it must, each window pooled from the full-context
  // token states, then aggregated as chunk; the pooling must pool tokens),
  // or extrapolate (run whole past the model's length where its scheme
  // can: not a learned table, FAILED_PRECONDITION; up to the model's
  // extrapolation limit, ExtrapolationLimit). Unset: the model's default
  // (DefaultLongInput), for the inputs past its length only.
  std::optional<LongInputPolicy> long_input;
  int64_t chunk_overlap = 0;  // tokens each window repeats, <= half a window
  bool chunk_max = false;
  // Input tokens per window (chunk, late_chunk); 0: the model's length less
  // its special tokens.
  int64_t chunk_tokens = 0;
  // Also return every window's vector with its spans (EmbeddedInput::
  // chunk_vectors).
  bool return_chunks = false;
  TextOptions text_options;
  std::string prompt_name;  // empty: the model's default prompt
  // The caller's own prompt text; set (even to "") it replaces the
  // model's default prompt. Not with prompt_name.
  std::optional<std::string> prompt;
  std::optional<int64_t> dimensions;  // pooled values kept (Matryoshka)
  // The pooled vectors as floats, their sign bits packed eight to a byte
  // (binary, ubinary), or a byte per value (int8, uint8: the value's place
  // in its dimension's range in 256 steps, as sentence-transformers'
  // quantize_embeddings). EmbeddedInput::packed holds the bytes.
  enum class Packing { kFloat, kBinary, kUbinary, kInt8, kUint8 };
  Packing packing = Packing::kFloat;
  // int8 / uint8: each kept dimension's range (calibration); empty: the
  // call's own vectors' min and max per dimension.
  std::vector<float> quantization_min, quantization_max;
  // Attention maps of these layers (none when empty), of these heads (all
  // when empty), or averaged over the heads.
  std::vector<int64_t> attention_layers;
  std::vector<int64_t> attention_heads;
  bool average_heads = false;
  bool token_embeddings = false;
  // The token embeddings through the model's token projection (a
  // multi-vector model's Dense and Normalize modules: tasks include
  // "multi_vector"; else FAILED_PRECONDITION).
  bool project_tokens = false;
  // "query" or "document": a ColBERT model's framing of every text input
  // (ModelDescription::colbert; FrameColbertText), which its projected
  // token embeddings need; a document's skiplist tokens have no row.
  // Empty: none; set on another model, INVALID_ARGUMENT.
  std::string input_type;
  bool attention_stats = false;
  // Hidden states after these layers (0 .. layers; negative: from the
  // end), pooled with the call's pooling when pool_hidden.
  std::vector<int64_t> hidden_layers;
  bool pool_hidden = false;
  // Also each input's sparse (SPLADE) vector (EmbeddedInput::result.
  // sparse_*): the entries above `threshold`, the `top_k` largest of them
  // (0: all). The model's tasks must include "sparse" (else
  // FAILED_PRECONDITION naming them); inputs are not chunked.
  struct Sparse {
    int64_t top_k = 0;
    float threshold = 0;
  };
  std::optional<Sparse> sparse;
};

// Where a window lies in its input: the input's own tokens [token_begin,
// token_end) (special tokens not counted) and, for text, the code points
// [char_begin, char_end) they came from (-1 for token ids).
struct ChunkSpan {
  int64_t token_begin = 0;
  int64_t token_end = 0;
  int64_t char_begin = -1;
  int64_t char_end = -1;
};

// One window's vector (cut and normalized as the input's pooled one).
struct ChunkVector {
  std::vector<float> embedding;
  ChunkSpan span;
};

// One input's result, in the order of the query's inputs.
struct EmbeddedInput {
  // `result.pooled` is already cut to the query's dimensions and
  // normalized as asked (result.pooled_dim is its width).
  api::EmbedResult result;
  bool truncated = false;
  int64_t truncated_tokens = 0;            // tokens truncation dropped
  int64_t chunks = 1;                      // windows it was embedded in
  std::vector<ChunkVector> chunk_vectors;  // EmbedQuery::return_chunks
  // With EmbedQuery::Packing binary or ubinary: the pooled vector's bits
  // (1 where > 0), first value in the high bit of byte 0; binary stores
  // each byte minus 128 (as int8). With int8 / uint8 a byte per value
  // (int8's as their two's-complement bits). result.pooled then holds
  // nothing.
  std::vector<uint8_t> packed;
  EmbedQuery::Packing packing = EmbedQuery::Packing::kFloat;
  // What the attention maps and hidden states hold: the layers, the heads
  // (empty when averaged) and the resolved hidden-state layers.
  std::vector<int64_t> attention_layers;
  std::vector<int64_t> attention_heads;
  std::vector<int64_t> hidden_layers;
};

struct EmbedAnswer {
  std::string model;  // the model that ran (the default's name when unnamed)
  std::string request_id;
  std::vector<EmbeddedInput> inputs;
  // int8 / uint8: the ranges the bytes are relative to.
  std::vector<float> quantization_min, quantization_max;
  int64_t total_tokens = 0;
  int64_t truncated_tokens = 0;  // summed over the inputs
  // The sparse vectors' width (EmbedQuery::sparse); 0 without them.
  int64_t sparse_vocab = 0;
  // The slowest input's queue and inference times, and the call's time
  // from admission to answer; tokenization_ms: from admission to the
  // sequences queued (reading, validating and tokenizing the inputs).
  double tokenization_ms = 0;
  double queue_ms = 0;
  double inference_ms = 0;
  double total_ms = 0;
};

struct PreparedEmbed {
  const api::ServedModel* model = nullptr;
  // One per input, or one per window of a chunked input.
  std::vector<api::EmbedSpec> sequences;
  // Per input: its first sequence, how many, whether it was cut, and
  // whether its aggregate is normalized (windows are pooled unnormalized).
  struct Input {
    size_t first = 0;
    size_t count = 1;
    bool truncated = false;
    int64_t truncated_tokens = 0;
    bool normalize = false;
    // Late chunking: one sequence whose pool_spans are the windows.
    bool late = false;
    // Its windows' spans (chunked, late-chunked or return_chunks); empty
    // otherwise.
    std::vector<ChunkSpan> spans;
    // A ColBERT document's tokens whose vectors are returned (its
    // skiplist tokens are not); empty: all.
    std::vector<bool> scored;
  };
  std::vector<Input> inputs;
  bool chunk_max = false;
  bool return_chunks = false;
  EmbedQuery::Packing packing = EmbedQuery::Packing::kFloat;
  std::vector<float> quantization_min, quantization_max;
  int64_t total_tokens = 0;
  // Pooled values kept per input (EmbedQuery::dimensions); 0: all.
  int64_t dimensions = 0;
};

// The policy a front's request names through its two fields: `policy` (a
// long_input policy) and `truncate` (true: truncate, false: refuse). Unset
// when neither is; a policy other than truncate beside truncate true is
// INVALID_ARGUMENT (one way to treat long inputs); truncate false beside
// another policy leaves that policy.
absl::StatusOr<std::optional<LongInputPolicy>> RequestedLongInput(
    std::optional<bool> truncate, std::optional<LongInputPolicy> policy);

// NOT_FOUND for an unknown model; INVALID_ARGUMENT for no inputs, an empty
// input, ids outside the vocabulary, bad layer or head indices, an input
// over the model's length limit without truncate, or dimensions outside 1
// .. the pooled width; RESOURCE_EXHAUSTED (marked too large, see
// core/status.h) when the response would exceed the send limit or an input
// would not fit the batch memory budget. Messages name the input index and
// the limit. Every sequence comes back priced.
absl::StatusOr<PreparedEmbed> PrepareEmbed(const EmbedQuery& query,
                                           const api::ModelCatalog& host,
                                           const ServiceLimits& limits);

// RESOURCE_EXHAUSTED when `spec` (priced, see SequenceCost) cannot run
// within the model's batch memory budget, naming the cost and the limit;
// `what` names the input in the message ("inputs[3]").
absl::Status CheckCost(const api::EmbedSpec& spec,
                       const api::ServedModel& model, const std::string& what);

// INVALID_ARGUMENT unless `layers` and `heads` are indices of `model`'s
// layers and heads without repeats, and heads or average_heads come with
// layers.
absl::Status CheckAttentionSelection(const std::vector<int64_t>& layers,
                                     const std::vector<int64_t>& heads,
                                     bool average_heads,
                                     const api::ServedModel& model);

// NOT_FOUND's message for a model name no model has: a short quote of the
// name and the names that exist.
std::string UnknownModelMessage(const std::string& requested,
                                const api::ModelCatalog& host);

// Upper estimate of the response's size in bytes (float32 values plus
// framing), for the send limit and the unread-response ledger.
int64_t EstimateResponseBytes(const PreparedEmbed& prepared);

// Keeps the first `dimensions` values of `pooled` and, when `normalize`,
// scales them to unit L2 norm (left as they are when all zero).
// `values`' sign bits (1 where > 0) packed eight to a byte, the first in
// the high bit (numpy's packbits), zero-padded to a whole byte; binary
// shifts each byte by -128 (int8), as sentence-transformers'
// quantize_embeddings.
std::vector<uint8_t> PackSignBits(const std::vector<float>& values,
                                  bool binary);

void CutPooled(int64_t dimensions, bool normalize, std::vector<float>* pooled);

// The int8 / uint8 bytes of every input's pooled vector (cleared), from
// the ranges given or, when none, the inputs' own per-dimension min and
// max, which *min and *max return: q = clip(floor((v - min) / step), 0,
// 255) with step (max - min) / 255 (1 where max equals min), minus 128 for
// int8, as sentence-transformers' quantize_embeddings.
void QuantizeScalar(bool int8, std::vector<EmbeddedInput>* inputs,
                    std::vector<float>* min, std::vector<float>* max);

// The answer from the batcher's results, in input order.
EmbedAnswer BuildAnswer(std::string request_id, const PreparedEmbed& prepared,
                        std::vector<api::EmbedResult> results, double total_ms);

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_EMBED_REQUEST_H_

// BGE-M3's two heads beside a checkpoint, in the layout FlagEmbedding's
// BGEM3FlagModel reads: colbert_linear.pt (a projection of every token
// after the first, its ColBERT vectors, L2-normalized) and
// sparse_linear.pt (one weight per token: relu of a projection onto one
// value, the lexical weight of the token's id), each a torch.save state
// dictionary of `weight` and `bias`.
#ifndef ENCODER_SERVER_MODEL_HF_M3_HEADS_H_
#define ENCODER_SERVER_MODEL_HF_M3_HEADS_H_

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "server/model/encoder.h"

namespace encoder::model::hf {

inline constexpr char kColbertHeadFile[] = "colbert_linear.pt";
inline constexpr char kSparseHeadFile[] = "sparse_linear.pt";

struct M3Heads {
  std::optional<DenseLayer> colbert;  // [colbert_dim, d_model] with bias
  std::optional<SparseHead> sparse;   // SparseHead::Kind::kTokenWeight
};

// The heads `dir` holds (neither: both empty), in `dtype` on the CPU. The
// sparse head drops the ids of the tokenizer's cls, eos, pad and unk
// tokens, as FlagEmbedding does, found through special_tokens_map.json or
// tokenizer_config.json and tokenizer.json. InvalidArgument, naming the
// file, for a head whose tensors do not fit `d_model`, or a special token
// the tokenizer files do not resolve.
// `text`'s id in a parsed tokenizer.json: an added token's, else the
// model's vocabulary entry (an object of text -> id, or Unigram's list of
// [piece, score]), as transformers' convert_tokens_to_ids finds it; -1
// when it has none.
int64_t TokenizerJsonId(const nlohmann::json& tokenizer,
                        const std::string& text);

// A special token's text (`key`: "mask_token", ...) as the tokenizer files
// in `files` (a JSON array, the first that has it wins) write it: "<s>", or
// {"content": "<s>", ...}; empty when absent.
std::string TokenText(const nlohmann::json& files, const std::string& key);

absl::StatusOr<M3Heads> ReadM3Heads(const std::string& dir, int64_t d_model,
                                    int64_t vocab, at::ScalarType dtype);

}  // namespace encoder::model::hf

#endif  // ENCODER_SERVER_MODEL_HF_M3_HEADS_H_

// Importers of Hugging Face checkpoint families. Each family's importer
// (one .cc per family) reads config.json into the encoder's ModelConfig and
// names, for every slot of the encoder's state_dict, the checkpoint tensors
// that fill it and the shape each must have. Loading, checking and error
// reporting are shared (hf_checkpoint.cc).
#ifndef ENCODER_SERVER_MODEL_HF_IMPORTER_H_
#define ENCODER_SERVER_MODEL_HF_IMPORTER_H_

#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "server/model/config.h"
#include "server/model/weights/weight_source.h"

namespace encoder::model::hf {

// Checkpoint tensors that fill one encoder slot, concatenated along dim 0
// in this order (e.g. query, key, value -> in_proj_weight).
struct SlotSource {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;  // expected, one per name
  // Added to every element, in float32, before the cast to the serving
  // dtype (Gemma's norms store their gain minus 1).
  double add = 0;
};

struct Import {
  std::string family;  // e.g. "bert", "jinabert", "t5"
  ModelConfig config;
  std::map<std::string, SlotSource> slots;  // encoder slot -> sources
  // Checkpoint tensors known to the family but not part of the encoder
  // (heads, decoders, pooler, stored position-id buffers, fixed tables).
  std::vector<std::string> ignored_prefixes;
  std::vector<std::string> ignored_suffixes;
};

// Sizes a config.json may give (vocabulary, widths, positions), and the
// encoder layers it may ask for: checked before anything is sized by them.
inline constexpr int64_t kMaxConfigSize = int64_t{1} << 24;
inline constexpr int64_t kMaxLayers = 1024;

// InvalidArgument for more than kMaxLayers layers.
absl::Status CheckLayerCount(int64_t layers);

// Reads config.json values; errors name the key.
class ConfigReader {
 public:
  explicit ConfigReader(const nlohmann::json& json) : json_(json) {}
  // A required size: an integer in [1, kMaxConfigSize].
  absl::StatusOr<int64_t> Int(const std::string& key) const;
  // Reads every required integer key into its field; the first missing or
  // non-integer key is the error.
  absl::Status Ints(
      std::initializer_list<std::pair<const char*, int64_t*>> fields) const;
  int64_t IntOr(const std::string& key, int64_t fallback) const;
  double NumberOr(const std::string& key, double fallback) const;
  std::string StringOr(const std::string& key,
                       const std::string& fallback) const;
  bool BoolOr(const std::string& key, bool fallback) const;
  bool Has(const std::string& key) const {
    return json_.contains(key) && !json_[key].is_null();
  }

 private:
  const nlohmann::json& json_;
};

// Maps a config.json activation name (hidden_act, activation_function,
// feed_forward_proj's) to ours; InvalidArgument names the unsupported one.
absl::StatusOr<Activation> ParseActivation(const std::string& name);

// Adds a slot filled by one tensor.
void AddSlot(Import* import, const std::string& slot, const std::string& name,
             std::vector<int64_t> shape);
// Adds a slot filled by several tensors concatenated along dim 0.
void AddConcatSlot(Import* import, const std::string& slot,
                   std::vector<std::string> names,
                   std::vector<std::vector<int64_t>> shapes);
// Encoder slot names.
std::string LayerSlot(int64_t layer, const std::string& leaf);

// The first of `candidates` under which the checkpoint stores `probe`
// (e.g. "bert." or "" before "embeddings.word_embeddings.weight").
std::string DetectPrefix(const WeightSource& source,
                         const std::vector<std::string>& candidates,
                         const std::string& probe);

// BERT-shaped families: bert (incl. JinaBERT v2 with ALiBi), roberta,
// xlm-roberta, camembert, electra (embedding_size equal to hidden_size),
// roformer; mpnet and distilbert (hf_mpnet.cc).
absl::StatusOr<Import> ImportBert(const nlohmann::json& config,
                                  const WeightSource& source);
absl::StatusOr<Import> ImportMpnet(const nlohmann::json& config,
                                   const WeightSource& source);
absl::StatusOr<Import> ImportDistilBert(const nlohmann::json& config,
                                        const WeightSource& source);
absl::StatusOr<Import> ImportRoformer(const nlohmann::json& config,
                                      const WeightSource& source);
absl::StatusOr<Import> ImportModernBert(const nlohmann::json& config,
                                        const WeightSource& source);
// A rotary scaling override (hf/rope_config.h's OverrideRope) on a
// ModernBERT config: `scaling` applies to both layer types, each keeping
// its own base unless `scaling` gives rope_theta, as a config.json
// rope_scaling would (modernbert.cc).
absl::Status OverrideModernBertRope(const std::string& scaling,
                                    nlohmann::json* config);
absl::StatusOr<Import> ImportT5(const nlohmann::json& config,
                                const WeightSource& source);
absl::StatusOr<Import> ImportMarian(const nlohmann::json& config,
                                    const WeightSource& source);
// DeBERTa-v2/v3 with disentangled attention (hf_deberta.cc).
absl::StatusOr<Import> ImportDebertaV2(const nlohmann::json& config,
                                       const WeightSource& source);
// Causal decoder embedders (qwen.cc).
absl::StatusOr<Import> ImportQwen2(const nlohmann::json& config,
                                   const WeightSource& source);
absl::StatusOr<Import> ImportQwen3(const nlohmann::json& config,
                                   const WeightSource& source);
// Gemma 3 text models: EmbeddingGemma, Gemma 3 decoders (gemma3.cc).
absl::StatusOr<Import> ImportGemma3Text(const nlohmann::json& config,
                                        const WeightSource& source);
// Llama and Mistral (llama.cc).
absl::StatusOr<Import> ImportLlama(const nlohmann::json& config,
                                   const WeightSource& source);
absl::StatusOr<Import> ImportMistral(const nlohmann::json& config,
                                     const WeightSource& source);

// The sizes every BERT-shaped config.json has (vocab_size, hidden_size,
// num_attention_heads, num_hidden_layers, intermediate_size,
// max_position_embeddings, hidden_act, layer_norm_eps), with an embedding
// norm and a token-type table of type_vocab_size rows.
absl::Status ReadBertSizes(const ConfigReader& r, ModelConfig* c);

// One post-norm (BERT-shaped) layer's tensors under a family's names, each
// the prefix of a .weight and a .bias: the q, k, v and output projections,
// the norm after attention, the feed-forward in and out, the norm after it.
struct PostNormNames {
  std::string q, k, v, out, norm1, ffn_in, ffn_out, norm2;
};
// Layer i's attention slots (q, k, v, out, norm1) and feed-forward slots
// (ffn_in, ffn_out, norm2).
void AddPostNormAttention(Import* import, int64_t i, const PostNormNames& n);
void AddPostNormFeedForward(Import* import, int64_t i, const PostNormNames& n);
// Word embeddings, the token-type table when the config has one, and the
// embedding LayerNorm under `emb` (e.g. "bert.embeddings.").
void AddBertEmbeddings(Import* import, const std::string& emb);
// The learned table `emb`position_embeddings.weight [max_positions, d_model].
void AddBertPositionTable(Import* import, const std::string& emb);

// Shared by the BERT-shaped importers: embeddings and post-norm layers
// under `prefix` (embeddings.*, encoder.layer.{i}.*).
void AddBertLayers(const std::string& prefix, bool gated, Import* import);

}  // namespace encoder::model::hf

#endif  // ENCODER_SERVER_MODEL_HF_IMPORTER_H_

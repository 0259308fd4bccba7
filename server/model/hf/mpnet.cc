// BERT-shaped families whose tensors have names of their own:
// mpnet (transformers' modeling_mpnet) and distilbert (modeling_distilbert).
// Both are post-norm encoders with learned absolute positions and no
// token-type table.
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/hf/importer.h"
#include "server/model/positional/schemes.h"

namespace encoder::model::hf {
namespace {

void AddPostNormLayer(Import* import, int64_t i, const PostNormNames& n) {
  AddPostNormAttention(import, i, n);
  AddPostNormFeedForward(import, i, n);
}

}  // namespace

absl::StatusOr<Import> ImportMpnet(const nlohmann::json& config,
                                   const WeightSource& source) {
  ConfigReader r(config);
  Import import;
  import.family = "mpnet";
  ModelConfig& c = import.config;
  RETURN_IF_ERROR(ReadBertSizes(r, &c));
  c.arch.token_type_embedding = false;  // MPNetEmbeddings has no such table
  c.arch.type_vocab_size = 0;
  // Positions as RoBERTa numbers them (from pad_token_id + 1), and a
  // relative bias over T5 buckets (max distance 128, fixed in
  // MPNetEncoder) shared by every layer, added to the scaled scores.
  c.arch.position_ids = PositionIdRule::kAfterPadding;
  c.arch.padding_idx = r.IntOr("pad_token_id", 1);
  c.positional = LearnedRelativeConfig(
      r.IntOr("relative_attention_num_buckets", 32), /*max_distance=*/128);

  const std::string p =
      DetectPrefix(source, {"mpnet.", ""}, "embeddings.word_embeddings.weight");
  AddBertEmbeddings(&import, p + "embeddings.");
  AddBertPositionTable(&import, p + "embeddings.");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string l = absl::StrCat(p, "encoder.layer.", i, ".");
    AddPostNormLayer(
        &import, i,
        {l + "attention.attn.q", l + "attention.attn.k", l + "attention.attn.v",
         l + "attention.attn.o", l + "attention.LayerNorm",
         l + "intermediate.dense", l + "output.dense", l + "output.LayerNorm"});
  }
  AddSlot(&import, "relative_attention_bias.weight",
          p + "encoder.relative_attention_bias.weight",
          {c.positional.num_buckets, c.num_heads});
  import.ignored_prefixes = {p + "pooler.", "lm_head."};
  import.ignored_suffixes = {"embeddings.position_ids"};
  return import;
}

absl::StatusOr<Import> ImportDistilBert(const nlohmann::json& config,
                                        const WeightSource& source) {
  ConfigReader r(config);
  Import import;
  import.family = "distilbert";
  ModelConfig& c = import.config;
  RETURN_IF_ERROR(r.Ints({{"vocab_size", &c.vocab_size},
                          {"dim", &c.d_model},
                          {"n_heads", &c.num_heads},
                          {"n_layers", &c.num_layers},
                          {"hidden_dim", &c.d_ff},
                          {"max_position_embeddings", &c.max_positions}}));
  RETURN_IF_ERROR(CheckLayerCount(c.num_layers));
  ASSIGN_OR_RETURN(auto act, ParseActivation(r.StringOr("activation", "gelu")));
  c.activation = act;
  c.layer_norm_eps = 1e-12;  // fixed in modeling_distilbert
  c.max_input_tokens = c.max_positions;
  c.arch.embedding_norm = true;
  // sinusoidal_pos_embds true fills the same table with fixed sinusoids
  // at initialization; the checkpoint stores it either way.
  c.positional = LearnedConfig();

  const std::string p = DetectPrefix(source, {"distilbert.", ""},
                                     "embeddings.word_embeddings.weight");
  AddBertEmbeddings(&import, p + "embeddings.");
  AddBertPositionTable(&import, p + "embeddings.");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string l = absl::StrCat(p, "transformer.layer.", i, ".");
    AddPostNormLayer(
        &import, i,
        {l + "attention.q_lin", l + "attention.k_lin", l + "attention.v_lin",
         l + "attention.out_lin", l + "sa_layer_norm", l + "ffn.lin1",
         l + "ffn.lin2", l + "output_layer_norm"});
  }
  // Heads of DistilBertForMaskedLM / ForSequenceClassification / ...
  import.ignored_prefixes = {"vocab_transform.", "vocab_layer_norm.",
                             "vocab_projector.", "pre_classifier.",
                             "classifier.",      "qa_outputs."};
  import.ignored_suffixes = {"embeddings.position_ids"};
  return import;
}

}  // namespace encoder::model::hf

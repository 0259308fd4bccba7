// bert, roberta, xlm-roberta, camembert, electra and JinaBERT v2 (a "bert"
// config with position_embedding_type "alibi"), as in transformers'
// modeling_bert / modeling_roberta / modeling_camembert / modeling_electra
// and Jina's JinaBERT implementation.
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/hf/importer.h"
#include "server/model/positional/schemes.h"

namespace encoder::model::hf {

void AddBertEmbeddings(Import* import, const std::string& emb) {
  const ModelConfig& c = import->config;
  const int64_t d = c.d_model;
  AddSlot(import, "embedding.weight", emb + "word_embeddings.weight",
          {c.vocab_size, d});
  if (c.arch.token_type_embedding) {
    AddSlot(import, "token_type_embedding.weight",
            emb + "token_type_embeddings.weight", {c.arch.type_vocab_size, d});
  }
  AddSlot(import, "embedding_norm.weight", emb + "LayerNorm.weight", {d});
  AddSlot(import, "embedding_norm.bias", emb + "LayerNorm.bias", {d});
}

void AddBertPositionTable(Import* import, const std::string& emb) {
  const ModelConfig& c = import->config;
  AddSlot(import, "pos_embedding.weight", emb + "position_embeddings.weight",
          {c.max_positions, c.d_model});
}

void AddPostNormAttention(Import* import, int64_t i, const PostNormNames& n) {
  const int64_t d = import->config.d_model;
  AddConcatSlot(import, LayerSlot(i, "self_attn.in_proj_weight"),
                {n.q + ".weight", n.k + ".weight", n.v + ".weight"},
                {{d, d}, {d, d}, {d, d}});
  AddConcatSlot(import, LayerSlot(i, "self_attn.in_proj_bias"),
                {n.q + ".bias", n.k + ".bias", n.v + ".bias"}, {{d}, {d}, {d}});
  AddSlot(import, LayerSlot(i, "self_attn.out_proj.weight"), n.out + ".weight",
          {d, d});
  AddSlot(import, LayerSlot(i, "self_attn.out_proj.bias"), n.out + ".bias",
          {d});
  AddSlot(import, LayerSlot(i, "norm1.weight"), n.norm1 + ".weight", {d});
  AddSlot(import, LayerSlot(i, "norm1.bias"), n.norm1 + ".bias", {d});
}

void AddPostNormFeedForward(Import* import, int64_t i, const PostNormNames& n) {
  const int64_t d = import->config.d_model, f = import->config.d_ff;
  AddSlot(import, LayerSlot(i, "linear1.weight"), n.ffn_in + ".weight", {f, d});
  AddSlot(import, LayerSlot(i, "linear1.bias"), n.ffn_in + ".bias", {f});
  AddSlot(import, LayerSlot(i, "linear2.weight"), n.ffn_out + ".weight",
          {d, f});
  AddSlot(import, LayerSlot(i, "linear2.bias"), n.ffn_out + ".bias", {d});
  AddSlot(import, LayerSlot(i, "norm2.weight"), n.norm2 + ".weight", {d});
  AddSlot(import, LayerSlot(i, "norm2.bias"), n.norm2 + ".bias", {d});
}

void AddBertLayers(const std::string& prefix, bool gated, Import* import) {
  const ModelConfig& c = import->config;
  const int64_t d = c.d_model, f = c.d_ff;
  AddBertEmbeddings(import, prefix + "embeddings.");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string l = absl::StrCat(prefix, "encoder.layer.", i, ".");
    const std::string self = l + "attention.self.";
    const PostNormNames names = {self + "query",
                                 self + "key",
                                 self + "value",
                                 l + "attention.output.dense",
                                 l + "attention.output.LayerNorm",
                                 l + "intermediate.dense",
                                 l + "output.dense",
                                 l + "output.LayerNorm"};
    AddPostNormAttention(import, i, names);
    if (gated) {
      // JinaBertGLUMLP: act(first F rows) * (last F rows), then wo.
      AddSlot(import, LayerSlot(i, "linear1.weight"),
              l + "mlp.gated_layers.weight", {2 * f, d});
      AddSlot(import, LayerSlot(i, "linear2.weight"), l + "mlp.wo.weight",
              {d, f});
      AddSlot(import, LayerSlot(i, "linear2.bias"), l + "mlp.wo.bias", {d});
      AddSlot(import, LayerSlot(i, "norm2.weight"), l + "mlp.layernorm.weight",
              {d});
      AddSlot(import, LayerSlot(i, "norm2.bias"), l + "mlp.layernorm.bias",
              {d});
    } else {
      AddPostNormFeedForward(import, i, names);
    }
  }
  // Heads and buffers a BERT-shaped checkpoint may carry.
  // ELECTRA's discriminator and generator heads too.
  import->ignored_prefixes.insert(
      import->ignored_prefixes.end(),
      {prefix + "pooler.", "cls.", "lm_head.", "discriminator_predictions.",
       "generator_predictions.", "generator_lm_head.", "classifier."});
  import->ignored_suffixes.push_back("embeddings.position_ids");
}

absl::Status ReadBertSizes(const ConfigReader& r, ModelConfig* c) {
  RETURN_IF_ERROR(r.Ints({{"vocab_size", &c->vocab_size},
                          {"hidden_size", &c->d_model},
                          {"num_attention_heads", &c->num_heads},
                          {"num_hidden_layers", &c->num_layers},
                          {"intermediate_size", &c->d_ff},
                          {"max_position_embeddings", &c->max_positions}}));
  RETURN_IF_ERROR(CheckLayerCount(c->num_layers));
  ASSIGN_OR_RETURN(auto act, ParseActivation(r.StringOr("hidden_act", "gelu")));
  c->activation = act;
  c->layer_norm_eps = r.NumberOr("layer_norm_eps", 1e-12);
  c->max_input_tokens = c->max_positions;
  c->arch.embedding_norm = true;
  c->arch.token_type_embedding = true;
  c->arch.type_vocab_size = r.IntOr("type_vocab_size", 2);
  return absl::OkStatus();
}

absl::StatusOr<Import> ImportBert(const nlohmann::json& config,
                                  const WeightSource& source) {
  ConfigReader r(config);
  Import import;
  ModelConfig& c = import.config;
  RETURN_IF_ERROR(ReadBertSizes(r, &c));
  const std::string model_type = r.StringOr("model_type", "bert");
  const bool roberta = model_type == "roberta" || model_type == "xlm-roberta" ||
                       model_type == "camembert";
  const bool electra = model_type == "electra";
  import.family = model_type;
  if (electra && r.IntOr("embedding_size", c.d_model) != c.d_model) {
    return absl::InvalidArgumentError(
        "config.json embedding_size differs from hidden_size; the "
        "embeddings_project layer of such ELECTRA checkpoints (the small "
        "ones) is not supported");
  }
  const std::string pe = r.StringOr("position_embedding_type", "absolute");
  bool gated = false;
  if (pe == "alibi" && !roberta) {
    // JinaBERT v2: symmetric ALiBi, no position table, gated feed-forward.
    import.family = "jinabert";
    c.positional = AlibiConfig();
    const std::string ff = r.StringOr("feed_forward_type", "original");
    if (ff == "geglu" || ff == "reglu") {
      gated = true;
      c.arch.gated_ffn = true;
      c.arch.ffn_in_bias = false;
      c.activation = ff == "geglu" ? Activation::kGelu : Activation::kRelu;
    } else if (ff != "original") {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json feed_forward_type \"", ff,
                       "\" is not supported (original, geglu, reglu)"));
    }
  } else if (pe == "absolute") {
    c.positional = LearnedConfig();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json position_embedding_type \"", pe,
                     "\" is not supported for ", model_type, " (absolute",
                     roberta ? "" : ", alibi", ")"));
  }
  if (roberta) {
    c.arch.position_ids = PositionIdRule::kAfterPadding;
    c.arch.padding_idx = r.IntOr("pad_token_id", 1);
  }
  const std::string prefix = DetectPrefix(
      source, {roberta ? "roberta." : (electra ? "electra." : "bert."), ""},
      "embeddings.word_embeddings.weight");
  AddBertLayers(prefix, gated, &import);
  if (pe == "absolute") {
    AddBertPositionTable(&import, prefix + "embeddings.");
  }
  return import;
}

absl::StatusOr<Import> ImportRoformer(const nlohmann::json& config,
                                      const WeightSource& source) {
  ConfigReader r(config);
  Import import;
  import.family = "roformer";
  ModelConfig& c = import.config;
  RETURN_IF_ERROR(ReadBertSizes(r, &c));
  if (r.IntOr("embedding_size", c.d_model) != c.d_model) {
    return absl::InvalidArgumentError(
        "config.json embedding_size differs from hidden_size; the "
        "embeddings_project layer of such RoFormer checkpoints is not "
        "supported");
  }
  if (r.BoolOr("rotary_value", false)) {
    return absl::InvalidArgumentError(
        "config.json rotary_value true (rotating values too) is not "
        "supported");
  }
  // Rotary codes on q and k with adjacent pairs, base 10000, from 0.
  c.positional = RopeConfig(RopeLayout::kInterleaved, 10000.0);
  const std::string prefix = DetectPrefix(source, {"roformer.", ""},
                                          "embeddings.word_embeddings.weight");
  AddBertLayers(prefix, /*gated=*/false, &import);
  // The fixed sinusoidal table some checkpoints store; computed instead.
  import.ignored_prefixes.push_back(prefix + "encoder.embed_positions.");
  return import;
}

}  // namespace encoder::model::hf

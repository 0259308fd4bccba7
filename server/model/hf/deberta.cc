// DeBERTa-v2 and -v3, as in transformers' modeling_deberta_v2: a BERT-shaped
// post-norm encoder whose attention adds content-to-position and
// position-to-content scores against shared relative position embeddings
// (the disentangled scheme), with or without a learned table at the input
// (position_biased_input).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/common/status_macros.h"
#include "server/model/hf/importer.h"
#include "server/model/positional/schemes.h"

namespace encoder::model::hf {
namespace {

// pos_att_type: a list (["p2c", "c2p"]) or, in older configs, a string
// ("p2c|c2p"). Other terms are refused by name.
absl::Status ReadAttentionTerms(const nlohmann::json& config,
                                PositionalConfig* pc) {
  std::vector<std::string> terms;
  if (config.contains("pos_att_type")) {
    const nlohmann::json& t = config["pos_att_type"];
    if (t.is_string()) {
      for (absl::string_view part :
           absl::StrSplit(t.get<std::string>(), '|', absl::SkipEmpty())) {
        terms.emplace_back(absl::StripAsciiWhitespace(part));
      }
    } else if (t.is_array()) {
      for (const auto& item : t) {
        if (!item.is_string()) {
          return absl::InvalidArgumentError(
              "config.json pos_att_type must list strings");
        }
        terms.push_back(item.get<std::string>());
      }
    } else if (!t.is_null()) {
      return absl::InvalidArgumentError(
          "config.json pos_att_type must be a list or a string");
    }
  }
  pc->c2p = pc->p2c = false;
  for (const std::string& term : terms) {
    if (term == "c2p") {
      pc->c2p = true;
    } else if (term == "p2c") {
      pc->p2c = true;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json pos_att_type \"", term,
                       "\" is not supported (c2p, p2c)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Import> ImportDebertaV2(const nlohmann::json& config,
                                       const WeightSource& source) {
  ConfigReader r(config);
  Import import;
  import.family = "deberta-v2";
  ModelConfig& c = import.config;
  RETURN_IF_ERROR(ReadBertSizes(r, &c));
  c.layer_norm_eps = r.NumberOr("layer_norm_eps", 1e-7);
  c.arch.type_vocab_size = r.IntOr("type_vocab_size", 0);
  c.arch.token_type_embedding = c.arch.type_vocab_size > 0;
  if (r.IntOr("embedding_size", c.d_model) != c.d_model) {
    return absl::InvalidArgumentError(
        "config.json embedding_size differs from hidden_size; the embed_proj "
        "layer is not supported");
  }
  if (r.IntOr("conv_kernel_size", 0) > 0) {
    return absl::InvalidArgumentError(
        "config.json conv_kernel_size > 0: the convolution beside the first "
        "layer (deberta-v2-xlarge/xxlarge) is not supported");
  }
  if (!r.BoolOr("relative_attention", false)) {
    return absl::InvalidArgumentError(
        "config.json relative_attention is false: a DeBERTa without "
        "disentangled attention is not supported");
  }
  PositionalConfig& pc = c.positional;
  pc = DisentangledConfig();
  RETURN_IF_ERROR(ReadAttentionTerms(config, &pc));
  pc.max_relative_positions = r.IntOr("max_relative_positions", -1);
  if (pc.max_relative_positions < 1)
    pc.max_relative_positions = c.max_positions;
  pc.position_buckets = std::max<int64_t>(0, r.IntOr("position_buckets", -1));
  pc.share_att_key = r.BoolOr("share_att_key", false);
  pc.absolute_input = r.BoolOr("position_biased_input", true);
  const std::string norm_rel = r.StringOr("norm_rel_ebd", "none");
  pc.relative_norm = false;
  for (absl::string_view part : absl::StrSplit(norm_rel, '|')) {
    const absl::string_view name = absl::StripAsciiWhitespace(part);
    if (name == "layer_norm") {
      pc.relative_norm = true;
    } else if (name != "none" && !name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config.json norm_rel_ebd \"", norm_rel, "\" is not supported"));
    }
  }

  const std::string p = DetectPrefix(source, {"deberta.", ""},
                                     "embeddings.word_embeddings.weight");
  AddBertEmbeddings(&import, p + "embeddings.");
  if (pc.absolute_input) AddBertPositionTable(&import, p + "embeddings.");
  const int64_t d = c.d_model;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string l = absl::StrCat(p, "encoder.layer.", i, ".");
    const std::string self = l + "attention.self.";
    const PostNormNames names = {self + "query_proj",
                                 self + "key_proj",
                                 self + "value_proj",
                                 l + "attention.output.dense",
                                 l + "attention.output.LayerNorm",
                                 l + "intermediate.dense",
                                 l + "output.dense",
                                 l + "output.LayerNorm"};
    AddPostNormAttention(&import, i, names);
    AddPostNormFeedForward(&import, i, names);
    if (!pc.share_att_key) {
      const std::pair<bool, const char*> projections[] = {
          {pc.c2p, "pos_key_proj"}, {pc.p2c, "pos_query_proj"}};
      for (const auto& [used, which] : projections) {
        if (!used) continue;
        AddSlot(&import,
                LayerSlot(i, absl::StrCat("self_attn.", which, ".weight")),
                self + which + ".weight", {d, d});
        AddSlot(&import,
                LayerSlot(i, absl::StrCat("self_attn.", which, ".bias")),
                self + which + ".bias", {d});
      }
    }
  }
  AddSlot(&import, "rel_embeddings.weight", p + "encoder.rel_embeddings.weight",
          {2 * pc.relative_span(), d});
  if (pc.relative_norm) {
    AddSlot(&import, "rel_embeddings_norm.weight",
            p + "encoder.LayerNorm.weight", {d});
    AddSlot(&import, "rel_embeddings_norm.bias", p + "encoder.LayerNorm.bias",
            {d});
  }
  // Heads: masked LM (both layouts), classifiers and their pooler.
  import.ignored_prefixes = {"lm_predictions.", "cls.", "pooler.",
                             "classifier.", "mask_predictions."};
  import.ignored_suffixes = {"embeddings.position_ids"};
  return import;
}

}  // namespace encoder::model::hf

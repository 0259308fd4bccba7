// The key tables themselves (hf_config_keys.h says what a rule is): the keys
// every config.json has, each family's, and the sentence-transformers
// files'. A key's spelling in another library release is its own entry.
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/model/hf/config_keys.h"

namespace encoder::model::hf {
namespace {

using nlohmann::json;

// Reasons shared by many keys.
constexpr char kTraining[] = "training only (dropout, initialization, loss)";
constexpr char kGeneration[] =
    "text generation only; the server runs no decoding loop";
constexpr char kBookkeeping[] =
    "bookkeeping of the saving library; nothing is computed from it";
constexpr char kOutputs[] =
    "chooses which outputs a forward returns, not their values";
constexpr char kKernel[] =
    "chooses the attention implementation; the server's kernels compute the "
    "same attention";
constexpr char kSpecialIds[] =
    "a special token id for the tokenizer or generation; the encoder's forward "
    "takes the ids as given";
constexpr char kDecoder[] = "the decoder's; the server runs the encoder only";
constexpr char kTensors[] =
    "the stored tensors decide; a checkpoint whose tensors disagree fails the "
    "shape check by name";
constexpr char kScaledRope[] =
    "read only by the scaled rotary types, which rope_type refuses; the "
    "default rotary init reads rope_theta and the head size only";

constexpr KeyUse kRead = KeyUse::kRead;
constexpr KeyUse kNoEffect = KeyUse::kNoEffect;
constexpr KeyUse kRefused = KeyUse::kRefused;

struct Entry {
  const char* key;
  KeyUse use;
  const char* why;
  std::vector<json> allowed = {};
  bool nested = false;
};

void Add(KeyTable* table, std::initializer_list<Entry> entries,
         const std::string& prefix = "") {
  for (const Entry& e : entries) {
    (*table)[prefix + e.key] = KeyRule{e.use, e.why, e.allowed, e.nested};
  }
}

// The sizes most families name alike; `feed_forward` says what
// intermediate_size is in the family.
void AddSizes(KeyTable* t, const char* feed_forward) {
  Add(t, {
             {"vocab_size", kRead, "the embedding table's rows"},
             {"hidden_size", kRead, "the model width"},
             {"num_attention_heads", kRead, "attention heads per layer"},
             {"num_hidden_layers", kRead, "layers"},
             {"intermediate_size", KeyUse::kRead, feed_forward},
         });
}

// transformers' attribute_map names (alias -> the family's own key, which
// is read).
void AddAliases(
    KeyTable* t,
    std::initializer_list<std::pair<const char*, const char*>> aliases) {
  for (const auto& [alias, name] : aliases) {
    (*t)[alias] = KeyRule{kNoEffect,
                          absl::StrCat("transformers' alias of ", name,
                                       " (attribute_map); ", name, " is read"),
                          {},
                          false};
  }
}

// PretrainedConfig's keys, as transformers 4.x and 5.x write them, and the
// older spellings still found in Hub checkpoints.
void AddCommon(KeyTable* t) {
  Add(t,
      {
          {"model_type", kRead, "chooses the importer"},
          {"architectures", kRead,
           "names the task head (classification, token classification)"},
          {"id2label", kRead,
           "the classification head's label names, in order"},
          {"label2id", kNoEffect, "the inverse of id2label, which is read"},
          {"num_labels", kNoEffect,
           "transformers derives it from id2label (read); the head's stored "
           "rows decide the score count"},
          {"problem_type", kRead,
           "multi_label_classification scores with a sigmoid per label"},
          {"sentence_transformers", kRead,
           "CrossEncoder's activation_fn for the scores"},
          {"sbert_ce_default_activation_function", kRead,
           "older CrossEncoder's activation for the scores"},
          {"_name_or_path", kNoEffect, kBookkeeping},
          {"transformers_version", kNoEffect, kBookkeeping},
          {"auto_map", kNoEffect,
           "where remote code lives; the server runs its own importer for the "
           "model_type"},
          {"custom_pipelines", kNoEffect, kBookkeeping},
          {"dtype", kNoEffect,
           "the stored weights' type; the server converts them to its --dtype"},
          {"torch_dtype", kNoEffect,
           "older spelling of dtype; the server converts to its --dtype"},
          {"_pre_quantization_dtype", kNoEffect, kBookkeeping},
          {"use_bfloat16", kNoEffect, "TensorFlow only"},
          {"tf_legacy_loss", kNoEffect, kTraining},
          {"chunk_size_feed_forward", kNoEffect,
           "splits the feed-forward over positions; each position's arithmetic "
           "is the same"},
          {"output_attentions", kNoEffect, kOutputs},
          {"output_hidden_states", kNoEffect, kOutputs},
          {"return_dict", kNoEffect, kOutputs},
          {"use_return_dict", kNoEffect, kOutputs},
          {"output_scores", kNoEffect, kGeneration},
          {"return_dict_in_generate", kNoEffect, kGeneration},
          {"torchscript", kNoEffect, "clones tied weights for tracing"},
          {"_attn_implementation", kNoEffect, kKernel},
          {"attn_implementation", kNoEffect, kKernel},
          {"_attn_implementation_autoset", kNoEffect, kKernel},
          {"use_cache", kNoEffect,
           "keeps keys and values for generation; one encoder pass uses none"},
          {"gradient_checkpointing", kNoEffect, kTraining},
          {"initializer_range", kNoEffect, kTraining},
          {"classifier_dropout", kNoEffect, kTraining},
          {"is_encoder_decoder", kNoEffect, kDecoder},
          {"is_decoder", kNoEffect,
           "not read by this family's encoder forward"},
          {"add_cross_attention", kNoEffect,
           "not read by this family's encoder forward"},
          {"cross_attention_hidden_size", kNoEffect, kDecoder},
          {"tie_encoder_decoder", kNoEffect, kDecoder},
          {"tie_word_embeddings", kNoEffect,
           "ties the language-model head, which embeddings do not use; a "
           "sparse head's tied decoder is found from the stored tensors"},
          {"pruned_heads",
           kRefused,
           "pruned attention heads are not supported; only an empty map is "
           "served",
           {json::object()}},
          {"finetuning_task", kNoEffect, kBookkeeping},
          {"task_specific_params", kNoEffect, "pipeline settings"},
          {"prefix", kNoEffect, "a pipeline's text prefix for generation"},
          {"tokenizer_class", kNoEffect,
           "the tokenizer comes from the tokenizer files beside the config"},
          {"bos_token_id", kNoEffect, kSpecialIds},
          {"eos_token_id", kNoEffect, kSpecialIds},
          {"sep_token_id", kNoEffect, kSpecialIds},
          {"cls_token_id", kNoEffect, kSpecialIds},
          {"pad_token_id", kNoEffect,
           "padding is masked; families whose positions count from it read it "
           "(their own entry says so)"},
          {"decoder_start_token_id", kNoEffect, kGeneration},
          {"forced_bos_token_id", kNoEffect, kGeneration},
          {"forced_eos_token_id", kNoEffect, kGeneration},
          {"max_length", kNoEffect, kGeneration},
          {"min_length", kNoEffect, kGeneration},
          {"do_sample", kNoEffect, kGeneration},
          {"early_stopping", kNoEffect, kGeneration},
          {"num_beams", kNoEffect, kGeneration},
          {"num_beam_groups", kNoEffect, kGeneration},
          {"diversity_penalty", kNoEffect, kGeneration},
          {"temperature", kNoEffect, kGeneration},
          {"top_k", kNoEffect, kGeneration},
          {"top_p", kNoEffect, kGeneration},
          {"typical_p", kNoEffect, kGeneration},
          {"repetition_penalty", kNoEffect, kGeneration},
          {"length_penalty", kNoEffect, kGeneration},
          {"no_repeat_ngram_size", kNoEffect, kGeneration},
          {"encoder_no_repeat_ngram_size", kNoEffect, kGeneration},
          {"bad_words_ids", kNoEffect, kGeneration},
          {"num_return_sequences", kNoEffect, kGeneration},
          {"exponential_decay_length_penalty", kNoEffect, kGeneration},
          {"suppress_tokens", kNoEffect, kGeneration},
          {"begin_suppress_tokens", kNoEffect, kGeneration},
          {"remove_invalid_values", kNoEffect, kGeneration},
          {"output_past", kNoEffect, kGeneration},
          {"xla_device", kNoEffect, "TensorFlow / XLA placement"},
      });
}

// The post-norm BERT-shaped families' keys (bert, roberta, xlm-roberta,
// camembert, electra, roformer; deberta-v2's sizes too).
void AddBertShaped(KeyTable* t) {
  AddSizes(t, "the feed-forward width");
  Add(t,
      {
          {"max_position_embeddings", kRead,
           "the position table's rows and the longest input"},
          {"hidden_act", kRead, "the feed-forward activation (ACT2FN names)"},

          {"layer_norm_eps", kRead, "every LayerNorm's epsilon"},
          {"type_vocab_size", kRead, "the token-type table's rows"},
          {"hidden_dropout_prob", kNoEffect, kTraining},
          {"attention_probs_dropout_prob", kNoEffect, kTraining},
          {"embedding_size", kRead,
           "must equal hidden_size: the projection after the embeddings of "
           "smaller ELECTRA / RoFormer checkpoints is refused"},
          {"is_decoder",
           kRefused,
           "a BERT decoder's causal mask is not served; only false",
           {json(false)}},
          {"add_cross_attention",
           kRefused,
           "cross-attention layers are not served; only false",
           {json(false)}},
      });
}

KeyTable Bert(bool roberta, bool electra, bool roformer) {
  KeyTable t;
  AddCommon(&t);
  AddBertShaped(&t);
  if (roformer) {
    Add(&t,
        {
            {"rotary_value", kRead, "true (rotating values too) is refused"},
            {"summary_type", kNoEffect,
             "RoFormer's multiple-choice head only; not served"},
            {"summary_use_proj", kNoEffect, "the multiple-choice head only"},
            {"summary_activation", kNoEffect, "the multiple-choice head only"},
            {"summary_proj_to_labels", kNoEffect,
             "the multiple-choice head only"},
            {"summary_first_dropout", kNoEffect, kTraining},
            {"summary_last_dropout", kNoEffect, kTraining},
        });
    return t;
  }
  Add(&t, {
              {"position_embedding_type", kRead,
               "absolute (a learned table) or, for JinaBERT, alibi; "
               "relative_key and relative_key_query are refused"},
          });
  if (roberta) {
    Add(&t,
        {{"pad_token_id", kRead,
          "positions count from pad_token_id + 1 (RoBERTa's position ids)"}});
  }
  if (electra) {
    Add(&t,
        {
            {"summary_type", kNoEffect,
             "ELECTRA's multiple-choice head only; its sequence classifier is "
             "dense, GELU, out_proj"},
            {"summary_use_proj", kNoEffect, "the multiple-choice head only"},
            {"summary_activation", kNoEffect, "the multiple-choice head only"},
            {"summary_proj_to_labels", kNoEffect,
             "the multiple-choice head only"},
            {"summary_first_dropout", kNoEffect, kTraining},
            {"summary_last_dropout", kNoEffect, kTraining},
        });
  }
  if (!roberta && !electra) {
    // JinaBERT v2's config (model_type "bert" with remote code).
    Add(&t,
        {
            {"feed_forward_type", kRead, "original, geglu or reglu (JinaBERT)"},
            {"emb_pooler", kNoEffect,
             "JinaBERT's pooling name for its own encode(); the server pools "
             "as the sentence-transformers files or --pooling say"},
        });
  }
  return t;
}

KeyTable DebertaV2() {
  KeyTable t;
  AddCommon(&t);
  AddBertShaped(&t);
  Add(&t,
      {
          {"is_decoder", kNoEffect, "not read by modeling_deberta_v2"},
          {"add_cross_attention", kNoEffect, "not read by modeling_deberta_v2"},
      });
  Add(&t,
      {
          {"relative_attention", kRead,
           "false (no disentangled attention) is refused"},
          {"max_relative_positions", kRead,
           "the relative span (< 1: the positions)"},
          {"position_buckets", kRead, "log buckets of relative positions"},
          {"share_att_key", kRead, "positions through the content projections"},
          {"position_biased_input", kRead,
           "absolute positions added to the input"},
          {"pos_att_type", kRead, "c2p and p2c terms (a list or \"c2p|p2c\")"},
          {"norm_rel_ebd", kRead, "layer_norm on the relative embeddings"},
          {"conv_kernel_size", kRead, "> 0 (the convolution layer) is refused"},
          {"conv_act", kNoEffect,
           "read only with conv_kernel_size > 0, refused"},
          {"conv_groups", kNoEffect,
           "read only with conv_kernel_size > 0, refused"},
          {"attention_head_size", kNoEffect, kTensors},
          {"pooler_hidden_act", kRead, "the classification head's activation"},
          {"pooler_hidden_size", kNoEffect, kTensors},
          {"pooler_dropout", kNoEffect, kTraining},
          {"cls_dropout", kNoEffect, kTraining},
          {"legacy", kNoEffect, "the masked-LM head's layout; not served"},
      });
  return t;
}

KeyTable Mpnet() {
  KeyTable t;
  AddCommon(&t);
  AddBertShaped(&t);
  Add(&t, {
              {"relative_attention_num_buckets", kRead,
               "the relative-bias buckets"},
              {"pad_token_id", kRead,
               "positions count from pad_token_id + 1 (MPNet's position ids)"},
              {"is_decoder", kNoEffect, "not read by modeling_mpnet"},
              {"add_cross_attention", kNoEffect, "not read by modeling_mpnet"},
              {"type_vocab_size", kNoEffect, "MPNet has no token-type table"},
              {"embedding_size", kNoEffect, kTensors},
          });
  return t;
}

KeyTable DistilBert() {
  KeyTable t;
  AddCommon(&t);
  Add(&t, {
              {"vocab_size", kRead, "the embedding table's rows"},
              {"dim", kRead, "the model width"},
              {"n_heads", kRead, "heads per layer"},
              {"n_layers", kRead, "layers"},
              {"hidden_dim", kRead, "the feed-forward width"},
              {"max_position_embeddings", kRead,
               "the position table's rows and the longest input"},
              {"activation", kRead, "the feed-forward activation"},
              {"sinusoidal_pos_embds", kNoEffect,
               "fills the position table at initialization; the checkpoint "
               "stores the table either way"},
              {"dropout", kNoEffect, kTraining},
              {"attention_dropout", kNoEffect, kTraining},
              {"qa_dropout", kNoEffect, kTraining},
              {"seq_classif_dropout", kNoEffect, kTraining},
              {"tie_weights_", kNoEffect, kTraining},
          });
  AddAliases(&t, {{"hidden_size", "dim"},
                  {"num_attention_heads", "n_heads"},
                  {"num_hidden_layers", "n_layers"}});
  return t;
}

// The rotary keys under `prefix`. `scaled`: the family serves the scaled
// types of transformers' rope initialization table too.
void AddRopeKeys(KeyTable* t, const std::string& prefix, bool scaled = false) {
  if (scaled) {
    Add(t,
        {
            {"rope_type", kRead,
             "default, linear, dynamic, yarn, longrope, llama3 and "
             "proportional are served; any other is refused by name"},
            {"type", kRead, "older spelling of rope_type"},
            {"rope_theta", kRead, "the rotary base"},
            {"partial_rotary_factor", kRead,
             "must be 1 with a scaled type (refused otherwise); the default "
             "init reads the head size only"},
            {"factor", kRead, "the scaling factor (every scaled type)"},
            {"original_max_position_embeddings", kRead,
             "yarn, longrope, llama3: the unscaled context (default: "
             "max_position_embeddings; a top-level key wins); dynamic grows "
             "past max_position_embeddings and does not read it"},
            {"attention_factor", kRead,
             "yarn, longrope: the cos/sin multiplier"},
            {"beta_fast", kRead, "yarn: the ramp's fast end (0: 32)"},
            {"beta_slow", kRead, "yarn: the ramp's slow end (0: 1)"},
            {"mscale", kRead, "yarn: the attention factor's numerator"},
            {"mscale_all_dim", kRead,
             "yarn: the attention factor's denominator"},
            {"truncate", kRead, "yarn: the ramp's ends rounded"},
            {"low_freq_factor", kRead, "llama3"},
            {"high_freq_factor", kRead, "llama3"},
            {"short_factor", kRead,
             "longrope: per-frequency divisors up to the original context"},
            {"long_factor", kRead,
             "longrope: per-frequency divisors past the original context"},
            {"mrope_section", kNoEffect,
             "multimodal rotary sections; text only here"},
        },
        prefix);
    return;
  }
  Add(t,
      {
          {"rope_type", kRead, "only \"default\" (unscaled) is served"},
          {"type", kRead, "older spelling of rope_type; only \"default\""},
          {"rope_theta", kRead, "the rotary base"},
          {"partial_rotary_factor", kNoEffect,
           "not read by this family's default rotary init (head size only)"},
          {"factor", kNoEffect, kScaledRope},
          {"original_max_position_embeddings", kNoEffect, kScaledRope},
          {"attention_factor", kNoEffect, kScaledRope},
          {"beta_fast", kNoEffect, kScaledRope},
          {"beta_slow", kNoEffect, kScaledRope},
          {"short_factor", kNoEffect, kScaledRope},
          {"long_factor", kNoEffect, kScaledRope},
          {"low_freq_factor", kNoEffect, kScaledRope},
          {"high_freq_factor", kNoEffect, kScaledRope},
          {"mscale", kNoEffect, kScaledRope},
          {"mscale_all_dim", kNoEffect, kScaledRope},
          {"truncate", kNoEffect, kScaledRope},
          {"mrope_section", kNoEffect,
           "multimodal rotary sections; text only here"},
      },
      prefix);
}

KeyTable ModernBert() {
  KeyTable t;
  AddCommon(&t);
  AddSizes(&t, "the gated feed-forward's width");
  Add(&t,
      {
          {"max_position_embeddings", kRead, "the longest input"},
          {"hidden_activation", kRead, "the feed-forward activation"},

          {"norm_eps", kRead, "every LayerNorm's epsilon"},
          {"norm_bias", kRead, "LayerNorms with a bias"},
          {"attention_bias", kRead,
           "q, k, v and output projections with a bias"},
          {"mlp_bias", kRead, "feed-forward projections with a bias"},
          {"layer_types", kRead,
           "full_attention / sliding_attention per layer"},
          {"global_attn_every_n_layers", kRead,
           "every n-th layer global (when layer_types is absent)"},
          {"local_attention", kRead, "the sliding layers' whole window"},
          {"sliding_window", kRead,
           "transformers 5's half window (local_attention / 2); a value that "
           "disagrees with local_attention is refused"},
          {"head_dim", kRead,
           "transformers 5 rotates head_dim dimensions of each head; only the "
           "whole head (hidden_size / num_attention_heads) is served"},
          {"original_max_position_embeddings", kRead,
           "yarn, longrope, llama3: the unscaled context"},
          {"partial_rotary_factor", kRead,
           "must be 1 with a scaled rotary type (refused otherwise)"},
          {"global_rope_theta", kRead, "the global layers' rotary base (4.x)"},
          {"local_rope_theta", kRead, "the sliding layers' rotary base (4.x)"},
          {"rope_scaling",
           kRead,
           "the rotary scaling of both layer types, each on its own base: "
           "every type of transformers' table",
           {},
           true},
          {"rope_parameters",
           kRead,
           "rotary base and scaling per layer type (5.x)",
           {},
           true},
          {"rope_parameters.full_attention",
           kRead,
           "the global layers' rotary",
           {},
           true},
          {"rope_parameters.sliding_attention",
           kRead,
           "the sliding layers' rotary",
           {},
           true},
          {"classifier_pooling", kRead,
           "cls or mean, for the classification head"},
          {"classifier_activation", kRead,
           "the classification head's activation"},
          {"classifier_bias", kNoEffect, kTensors},
          {"decoder_bias", kNoEffect, "the masked-LM head's; not served"},
          {"attention_dropout", kNoEffect, kTraining},
          {"embedding_dropout", kNoEffect, kTraining},
          {"mlp_dropout", kNoEffect, kTraining},
          {"initializer_cutoff_factor", kNoEffect, kTraining},
          {"sparse_prediction", kNoEffect, "masked-LM training only"},
          {"sparse_pred_ignore_index", kNoEffect, "masked-LM training only"},
          {"repad_logits_with_grad", kNoEffect, kTraining},
          {"deterministic_flash_attn", kNoEffect, kKernel},
          {"reference_compile", kNoEffect, "torch.compile on or off"},
          {"position_embedding_type", kNoEffect,
           "not read by modeling_modernbert (rotary always)"},
      });
  AddRopeKeys(&t, "rope_scaling.", /*scaled=*/true);
  AddRopeKeys(&t, "rope_parameters.full_attention.", /*scaled=*/true);
  AddRopeKeys(&t, "rope_parameters.sliding_attention.", /*scaled=*/true);
  return t;
}

KeyTable Qwen(bool qwen3) {
  KeyTable t;
  AddCommon(&t);
  AddSizes(&t, "the gated feed-forward's width");
  Add(&t,
      {
          {"num_key_value_heads", kRead, "key / value heads (grouped queries)"},
          {"max_position_embeddings", kRead, "the longest input"},

          {"hidden_act", kRead, "the feed-forward activation"},
          {"rms_norm_eps", kRead, "every RMSNorm's epsilon"},
          {"head_dim", kRead, "the width of a head (else hidden / heads)"},
          {"rope_theta", kRead, "the rotary base (4.x)"},
          {"rope_scaling",
           kRead,
           "the rotary scaling (4.x): every type of transformers' table",
           {},
           true},
          {"rope_parameters", kRead, "the rotary parameters (5.x)", {}, true},
          {"original_max_position_embeddings", kRead,
           "yarn, longrope, llama3: the unscaled context, over "
           "rope_parameters' (5.x)"},
          {"use_sliding_window", kRead,
           "whether sliding_window counts (transformers sets it null "
           "otherwise)"},
          {"layer_types", kRead,
           "full_attention / sliding_attention per layer"},
          {"sliding_window", kRead,
           "the sliding layers' causal window (keys seen, the query's own "
           "included)"},
          {"max_window_layers", kRead,
           "the layers from this one on slide (when layer_types is absent)"},
          {"attention_dropout", kNoEffect, kTraining},
          {"partial_rotary_factor", kRead,
           "must be 1 with a scaled rotary type (refused otherwise); "
           "Qwen's default rotary init reads the head size only"},
      });
  if (qwen3) {
    Add(&t, {{"attention_bias", kRead, "q, k, v and output biases"}});
  } else {
    Add(&t, {{"attention_bias", kNoEffect,
              "not read by modeling_qwen2: q, k and v always have biases"}});
  }
  AddRopeKeys(&t, "rope_scaling.", /*scaled=*/true);
  AddRopeKeys(&t, "rope_parameters.", /*scaled=*/true);
  return t;
}

// Llama and Mistral: the rotary decoder keys of Qwen's table, their
// biases and windows.
KeyTable LlamaOrMistral(bool mistral) {
  KeyTable t;
  AddCommon(&t);
  AddSizes(&t, "the gated feed-forward's width");
  Add(&t,
      {
          {"num_key_value_heads", kRead, "key / value heads (grouped queries)"},
          {"max_position_embeddings", kRead, "the longest input"},
          {"hidden_act", kRead, "the feed-forward activation"},
          {"rms_norm_eps", kRead, "every RMSNorm's epsilon"},
          {"head_dim", kRead, "the width of a head (else hidden / heads)"},
          {"rope_theta", kRead, "the rotary base (4.x)"},
          {"rope_scaling",
           kRead,
           "the rotary scaling (4.x): every type of transformers' table",
           {},
           true},
          {"rope_parameters", kRead, "the rotary parameters (5.x)", {}, true},
          {"original_max_position_embeddings", kRead,
           "yarn, longrope, llama3: the unscaled context, over "
           "rope_parameters' (5.x)"},
          {"attention_dropout", kNoEffect, kTraining},
          {"partial_rotary_factor", kRead,
           "must be 1 with a scaled rotary type (refused otherwise)"},
      });
  if (mistral) {
    Add(&t, {{"sliding_window", kRead,
              "every layer's causal window (null: full; absent: 4096)"},
             {"layer_types", kNoEffect,
              "not read by modeling_mistral (every layer alike)"}});
  } else {
    Add(&t, {{"attention_bias", kRead, "q, k, v and output biases"},
             {"mlp_bias", kRead, "gate, up and down projection biases"},
             {"pretraining_tp", kNoEffect,
              "tensor-parallel slicing in training; not read by "
              "modeling_llama"}});
  }
  AddRopeKeys(&t, "rope_scaling.", /*scaled=*/true);
  AddRopeKeys(&t, "rope_parameters.", /*scaled=*/true);
  return t;
}

KeyTable Gemma3Text() {
  KeyTable t;
  AddCommon(&t);
  AddSizes(&t, "the gated feed-forward's width");
  constexpr char kMultimodal[] = "the multimodal Gemma 3's; text only here";
  Add(&t,
      {
          {"num_key_value_heads", kRead, "key / value heads (grouped queries)"},
          {"max_position_embeddings", kRead, "the longest input"},
          {"hidden_activation", kRead, "the feed-forward activation"},
          {"rms_norm_eps", kRead, "every RMSNorm's epsilon"},
          {"head_dim", kRead, "the width of a head (default 256)"},
          {"query_pre_attn_scalar", kRead,
           "scores are divided by its square root"},
          {"attention_bias", kRead, "q, k, v and output biases"},
          {"use_bidirectional_attention", kRead,
           "true: no causal mask (EmbeddingGemma); sliding layers then see "
           "|i - j| <= sliding_window / 2"},
          {"sliding_window", kRead, "the sliding layers' window"},
          {"layer_types", kRead,
           "full_attention / sliding_attention per layer"},
          {"sliding_window_pattern", kRead,
           "every n-th layer full (when layer_types is absent)"},
          {"_sliding_window_pattern", kRead,
           "every n-th layer full (when layer_types is absent)"},
          {"attn_logit_softcapping", kRead, "refused unless null"},
          {"final_logit_softcapping", kNoEffect,
           "the language-model head's; not served"},
          {"rope_theta", kRead, "the full layers' rotary base (4.x)"},
          {"rope_local_base_freq", kRead,
           "the sliding layers' rotary base (4.x)"},
          {"rope_scaling",
           kRead,
           "the full layers' rotary scaling (4.x)",
           {},
           true},
          {"rope_parameters",
           kRead,
           "rotary parameters per layer type (5.x)",
           {},
           true},
          {"rope_parameters.full_attention",
           kRead,
           "the full layers' rotary",
           {},
           true},
          {"rope_parameters.sliding_attention",
           kRead,
           "the sliding layers' rotary",
           {},
           true},
          {"original_max_position_embeddings", kRead,
           "yarn, longrope, llama3: the unscaled context"},
          {"partial_rotary_factor", kRead,
           "must be 1 with a scaled rotary type (refused otherwise)"},
          {"attention_dropout", kNoEffect, kTraining},
          {"image_token_id", kNoEffect, kMultimodal},
          {"mm_tokens_per_image", kNoEffect, kMultimodal},
          {"text_config", kNoEffect, kMultimodal},
          {"vision_config", kNoEffect, kMultimodal},
      });
  AddRopeKeys(&t, "rope_scaling.", /*scaled=*/true);
  AddRopeKeys(&t, "rope_parameters.full_attention.", /*scaled=*/true);
  AddRopeKeys(&t, "rope_parameters.sliding_attention.", /*scaled=*/true);
  return t;
}

KeyTable T5() {
  KeyTable t;
  AddCommon(&t);
  Add(&t, {
              {"vocab_size", kRead, "the embedding table's rows"},
              {"d_model", kRead, "the model width"},
              {"d_kv", kRead, "the width of a head"},
              {"num_heads", kRead, "heads per layer"},
              {"num_layers", kRead, "encoder layers"},
              {"d_ff", kRead, "the feed-forward width"},
              {"feed_forward_proj", kRead,
               "the activation, gated (\"gated-gelu\") or not"},
              {"layer_norm_epsilon", kRead, "every RMSNorm's epsilon"},
              {"relative_attention_num_buckets", kRead,
               "the relative-bias buckets"},
              {"relative_attention_max_distance", kRead,
               "the farthest bucket's reach"},
              {"n_positions", kRead, "the longest input (older configs)"},
              {"dense_act_fn", kNoEffect,
               "T5Config derives it from feed_forward_proj, which is read"},
              {"is_gated_act", kNoEffect,
               "T5Config derives it from feed_forward_proj, which is read"},
              {"num_decoder_layers", kNoEffect, kDecoder},
              {"scale_decoder_outputs", kNoEffect, kDecoder},
              {"dropout_rate", kNoEffect, kTraining},
              {"initializer_factor", kNoEffect, kTraining},
          });
  AddAliases(&t, {{"hidden_size", "d_model"},
                  {"num_attention_heads", "num_heads"},
                  {"num_hidden_layers", "num_layers"}});
  return t;
}

KeyTable Marian() {
  KeyTable t;
  AddCommon(&t);
  Add(&t,
      {
          {"vocab_size", kRead, "the embedding table's rows"},
          {"d_model", kRead, "the model width"},
          {"encoder_attention_heads", kRead, "heads per encoder layer"},
          {"encoder_layers", kRead, "encoder layers"},
          {"encoder_ffn_dim", kRead, "the encoder feed-forward width"},
          {"max_position_embeddings", kRead,
           "the sinusoidal table's rows and the longest input"},
          {"activation_function", kRead, "the feed-forward activation"},
          {"scale_embedding", kRead, "embeddings times sqrt(d_model)"},
          {"normalize_before",
           kRefused,
           "pre-norm Marian is not served",
           {json(false)}},
          {"normalize_embedding",
           kRefused,
           "a LayerNorm on the embeddings is not served",
           {json(false)}},
          {"share_encoder_decoder_embeddings", kNoEffect, kTensors},
          {"decoder_vocab_size", kNoEffect, kDecoder},
          {"decoder_layers", kNoEffect, kDecoder},
          {"decoder_attention_heads", kNoEffect, kDecoder},
          {"decoder_ffn_dim", kNoEffect, kDecoder},
          {"decoder_layerdrop", kNoEffect, kTraining},
          {"encoder_layerdrop", kNoEffect, kTraining},
          {"dropout", kNoEffect, kTraining},
          {"attention_dropout", kNoEffect, kTraining},
          {"activation_dropout", kNoEffect, kTraining},
          {"init_std", kNoEffect, kTraining},
          {"classif_dropout", kNoEffect, kTraining},
          {"add_bias_logits", kNoEffect, "not read by modeling_marian"},
          {"add_final_layer_norm", kNoEffect, "not read by modeling_marian"},
          {"static_position_embeddings", kNoEffect,
           "not read by modeling_marian (sinusoidal always)"},
          {"extra_pos_embeddings", kNoEffect, "not read by modeling_marian"},
      });
  AddAliases(&t, {{"hidden_size", "d_model"},
                  {"num_attention_heads", "encoder_attention_heads"},
                  {"num_hidden_layers", "encoder_layers"}});
  return t;
}

}  // namespace

const std::map<std::string, KeyTable>& ConfigKeyTables() {
  static const auto* tables = new std::map<std::string, KeyTable>{
      {"bert", Bert(false, false, false)},
      {"roberta", Bert(true, false, false)},
      {"xlm-roberta", Bert(true, false, false)},
      {"camembert", Bert(true, false, false)},
      {"electra", Bert(false, true, false)},
      {"roformer", Bert(false, false, true)},
      {"deberta-v2", DebertaV2()},
      {"mpnet", Mpnet()},
      {"distilbert", DistilBert()},
      {"modernbert", ModernBert()},
      {"qwen2", Qwen(false)},
      {"qwen3", Qwen(true)},
      {"llama", LlamaOrMistral(false)},
      {"mistral", LlamaOrMistral(true)},
      {"gemma3_text", Gemma3Text()},
      {"t5", T5()},
      {"marian", Marian()},
  };
  return *tables;
}

namespace {

KeyTable ModuleTable(std::initializer_list<Entry> entries) {
  KeyTable t;
  Add(&t, entries);
  return t;
}

constexpr char kModuleIo[] =
    "sentence_embedding or token_embeddings, written back to the same key";

}  // namespace

const std::map<std::string, KeyTable>& ModuleKeyTables() {
  static const auto* tables = new std::map<std::string, KeyTable>{
      {"Pooling",
       ModuleTable({
           {"pooling_mode", kRead, "the mode's name (6.x), or a list"},
           {"embedding_dimension", kRead, "must equal the model width (6.x)"},
           {"word_embedding_dimension", kRead,
            "must equal the model width (older spelling)"},
           {"pooling_mode_cls_token", kRead, "older spelling of cls"},
           {"pooling_mode_max_tokens", kRead, "older spelling of max"},
           {"pooling_mode_mean_tokens", kRead, "older spelling of mean"},
           {"pooling_mode_mean_sqrt_len_tokens", kRead,
            "older spelling of mean_sqrt_len_tokens"},
           {"pooling_mode_weightedmean_tokens", kRead,
            "older spelling of weightedmean"},
           {"pooling_mode_lasttoken", kRead, "older spelling of lasttoken"},
           {"include_prompt", kRead, "whether the prompt's tokens are pooled"},
       })},
      {"Dense", ModuleTable({
                    {"in_features", kRead, "must follow the input's width"},
                    {"out_features", kRead, "the output width"},
                    {"bias", kRead, "whether the layer has a bias"},
                    {"activation_function", kRead,
                     "Identity, Tanh, ReLU, GELU or Sigmoid"},
                    {"module_input_name", kRead, kModuleIo},
                    {"module_output_name", kRead, kModuleIo},
                    {"use_residual", kRead, "true is refused"},
                })},
      {"LayerNorm",
       ModuleTable({
           {"dimension", kRead, "must equal the pooled vector's width"},
       })},
      {"Normalize", ModuleTable({
                        {"module_input_name", kRead, kModuleIo},
                        {"module_output_name", kRead, kModuleIo},
                    })},
      {"SpladePooling",
       ModuleTable({
           {"pooling_strategy", kRead, "max or sum"},
           {"activation_function", kRead, "relu or log1p_relu"},
           {"embedding_dimension", kNoEffect,
            "the vocabulary size, taken from the model's head"},
       })},
      {"Transformer",
       ModuleTable({
           {"max_seq_length", kRead, "the longest input (older files)"},
           {"do_lower_case", kRead, "texts lowercased before tokenizing"},
           {"processor_kwargs", kRead,
            "its model_max_length is the longest input"},
           {"tokenizer_args", kRead,
            "older spelling of processor_kwargs (model_max_length)"},
           {"model_args", kNoEffect,
            "arguments for loading the transformers model (dtype, remote "
            "code); the server imports config.json itself"},
           {"config_args", kNoEffect,
            "arguments for loading the transformers config; config.json is "
            "what is read"},
           {"cache_dir", kNoEffect, kBookkeeping},
           {"backend",
            kRefused,
            "only torch (the weights as saved) is served",
            {json("torch")}},
           {"transformer_task",
            kRefused,
            "feature-extraction, fill-mask (a sparse model's masked-LM head) "
            "and sequence-classification (a cross-encoder's head) are served",
            {json("feature-extraction"), json("fill-mask"),
             json("sequence-classification")}},
           {"modality_config", kNoEffect,
            "which modalities the module takes; the server takes text"},
           {"module_output_name",
            kRefused,
            "the module writes token_embeddings, or a cross-encoder's scores",
            {json("token_embeddings"), json("scores")}},
           {"processing_kwargs",
            kRefused,
            "keyword arguments for calling the tokenizer (padding, truncation, "
            "a chat template) are not served; only empty",
            {json::object()}},
           {"unpad_inputs", kNoEffect,
            "packs inputs without padding; each text's arithmetic is the same"},
           {"query_length",
            kRefused,
            "a per-task text length is not served; only null",
            {}},
           {"document_length",
            kRefused,
            "a per-task text length is not served; only null",
            {}},
           {"query_expansion",
            kRefused,
            "query expansion by mask tokens is not served; only null",
            {}},
       })},
      {"config_sentence_transformers.json",
       ModuleTable({
           {"prompts", kRead, "the named prompts"},
           {"activation_fn", kRead,
            "a CrossEncoder's score activation (6.x); before config.json's "
            "sentence_transformers.activation_fn"},
           {"keep_in_fp32_modules", kNoEffect,
            "float32 islands under autocast; the server runs a model in one "
            "--dtype"},
           {"default_prompt_name", kRead, "the prompt used when none is named"},
           {"similarity_fn_name", kNoEffect,
            "the similarity the library computes between vectors; the server "
            "returns the vectors"},
           {"__version__", kNoEffect, kBookkeeping},
           {"model_type", kNoEffect,
            "the library's model class; modules.json decides the modules"},
           {"query_prefix", kRead,
            "PyLate's query marker, inserted after the first token"},
           {"document_prefix", kRead,
            "PyLate's document marker, inserted after the first token"},
           {"query_length", kRead,
            "PyLate: tokens per query (expanded to it), the marker included"},
           {"document_length", kRead,
            "PyLate: tokens a document is cut to, the marker included"},
           {"do_query_expansion", kRead,
            "PyLate: queries padded with mask tokens to query_length"},
           {"attend_to_expansion_tokens", kRead,
            "PyLate: whether the query's tokens attend to its mask tokens"},
           {"skiplist_words", kRead,
            "PyLate: document tokens left out of the scoring"},
       })},
      {"modules.json",
       ModuleTable({
           {"idx", kNoEffect, "the module's index; the list's order is used"},
           {"name", kNoEffect, kBookkeeping},
           {"path", kRead, "the module's directory"},
           {"type", kRead, "the module type"},
           {"kwargs", kNoEffect,
            "arguments passed from the pipeline at run time (the task); the "
            "server's request fields carry them"},
       })},
  };
  return *tables;
}

}  // namespace encoder::model::hf

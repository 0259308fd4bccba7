#include "server/model/hf/heads.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/model/hf/importer.h"
#include "server/model/torch_status.h"

namespace encoder::model::hf {
namespace {

using nlohmann::json;

// A layer named `prefix`.weight / .bias (the bias where stored).
HeadLayerSource Layer(const WeightSource& source, const std::string& prefix,
                      DenseLayer::Act act) {
  HeadLayerSource l;
  l.weight = prefix + ".weight";
  if (source.Has(prefix + ".bias")) l.bias = prefix + ".bias";
  l.act = act;
  return l;
}

absl::StatusOr<DenseLayer::Act> HeadAct(const std::string& name) {
  static const auto* acts = new std::map<std::string, DenseLayer::Act>{
      {"tanh", DenseLayer::Act::kTanh},
      {"gelu", DenseLayer::Act::kGelu},
      {"relu", DenseLayer::Act::kRelu},
      {"sigmoid", DenseLayer::Act::kSigmoid},
      {"linear", DenseLayer::Act::kIdentity}};
  auto it = acts->find(name);
  if (it == acts->end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the classification head's activation \"", name,
        "\" is not supported (tanh, gelu, relu, sigmoid, linear)"));
  }
  return it->second;
}

// The first of `prefixes` + `leaf` + ".weight" stored; empty if none.
std::string Stored(const WeightSource& source,
                   const std::vector<std::string>& prefixes,
                   const std::string& leaf) {
  for (const std::string& p : prefixes) {
    if (source.Has(p + leaf + ".weight")) return p + leaf;
  }
  return "";
}

// The family's head layers, or an empty list when the checkpoint has no
// head. Layouts as transformers' *ForSequenceClassification builds them.
absl::StatusOr<HeadSource> Layout(const json& config, const std::string& family,
                                  const WeightSource& source) {
  ConfigReader r(config);
  HeadSource h;
  using Act = DenseLayer::Act;
  if (family == "bert" || family == "jinabert") {
    // BertPooler (tanh) on [CLS], then `classifier`.
    if (!source.Has("classifier.weight")) return h;
    const std::string pooler = Stored(source, {"bert.", ""}, "pooler.dense");
    if (pooler.empty()) {
      return absl::InvalidArgumentError(
          "the checkpoint has a classifier but no pooler.dense (BERT's "
          "classification head pools through it)");
    }
    h.layers = {Layer(source, pooler, Act::kTanh),
                Layer(source, "classifier", Act::kIdentity)};
  } else if (family == "roberta" || family == "xlm-roberta" ||
             family == "camembert" || family == "mpnet" ||
             family == "electra" || family == "roformer") {
    // A dense layer on <s>, then out_proj: tanh for RoBERTa and MPNet,
    // GELU for ELECTRA, hidden_act for RoFormer.
    if (!source.Has("classifier.out_proj.weight")) return h;
    std::string act = "tanh";
    if (family == "electra") act = "gelu";
    if (family == "roformer") act = r.StringOr("hidden_act", "gelu");
    ASSIGN_OR_RETURN(auto a, HeadAct(act));
    h.layers = {Layer(source, "classifier.dense", a),
                Layer(source, "classifier.out_proj", Act::kIdentity)};
  } else if (family == "deberta-v2") {
    // ContextPooler (pooler_hidden_act) on [CLS], then `classifier`.
    if (!source.Has("classifier.weight")) return h;
    ASSIGN_OR_RETURN(auto a, HeadAct(r.StringOr("pooler_hidden_act", "gelu")));
    h.layers = {Layer(source, "pooler.dense", a),
                Layer(source, "classifier", Act::kIdentity)};
  } else if (family == "distilbert") {
    if (!source.Has("classifier.weight")) return h;
    h.layers = {Layer(source, "pre_classifier", Act::kRelu),
                Layer(source, "classifier", Act::kIdentity)};
  } else if (family == "modernbert") {
    // head: dense, activation, LayerNorm; pooled by [CLS] or the mean.
    if (!source.Has("classifier.weight")) return h;
    const std::string pooling = r.StringOr("classifier_pooling", "cls");
    if (pooling != "cls" && pooling != "mean") {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json classifier_pooling \"", pooling,
                       "\" is not supported (cls, mean)"));
    }
    h.pooling = pooling == "cls" ? Pooling::kFirst : Pooling::kMean;
    ASSIGN_OR_RETURN(
        auto a, HeadAct(r.StringOr("classifier_activation",
                                   r.StringOr("hidden_activation", "gelu"))));
    HeadLayerSource dense = Layer(source, "head.dense", a);
    dense.norm_weight = "head.norm.weight";
    if (source.Has("head.norm.bias")) dense.norm_bias = "head.norm.bias";
    dense.norm_eps = r.NumberOr("norm_eps", 1e-5);
    h.layers = {dense, Layer(source, "classifier", Act::kIdentity)};
  } else if (family == "qwen2" || family == "qwen3" || family == "llama" ||
             family == "mistral" || family == "gemma3_text") {
    // `score` on the last token.
    if (!source.Has("score.weight")) return h;
    h.pooling = Pooling::kLastToken;
    h.layers = {Layer(source, "score", Act::kIdentity)};
    // transformers scores the last token that is not the pad token.
    h.pad_id = r.IntOr("pad_token_id", -1);
  }
  return h;
}

// id2label in index order; LABEL_i where the config names none.
absl::StatusOr<std::vector<std::string>> Labels(const json& config,
                                                int64_t count) {
  std::vector<std::string> labels(count);
  for (int64_t i = 0; i < count; ++i) labels[i] = absl::StrCat("LABEL_", i);
  if (!config.contains("id2label") || !config["id2label"].is_object()) {
    return labels;
  }
  const json& map = config["id2label"];
  if (static_cast<int64_t>(map.size()) != count) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json id2label names ", map.size(),
                     " labels; the classifier has ", count, " outputs"));
  }
  for (const auto& [key, value] : map.items()) {
    int64_t index = -1;
    try {
      size_t used = 0;
      index = std::stoll(key, &used);
      if (used != key.size()) index = -1;
    } catch (const std::exception&) {
      index = -1;
    }
    if (index < 0 || index >= count || !value.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json id2label entry \"", key,
                       "\" must map an index below ", count, " to a string"));
    }
    labels[index] = value.get<std::string>();
  }
  return labels;
}

// sentence-transformers' CrossEncoder activation where its config names
// one; else a sigmoid for one logit or multi-label problems and a softmax
// over several labels (text-embeddings-inference's rule).
absl::StatusOr<ScoreActivation> Activation(const json& config, int64_t labels) {
  std::string name;
  if (config.contains("sentence_transformers") &&
      config["sentence_transformers"].is_object() &&
      config["sentence_transformers"].contains("activation_fn") &&
      config["sentence_transformers"]["activation_fn"].is_string()) {
    name = config["sentence_transformers"]["activation_fn"].get<std::string>();
  } else if (config.contains("sbert_ce_default_activation_function") &&
             config["sbert_ce_default_activation_function"].is_string()) {
    name = config["sbert_ce_default_activation_function"].get<std::string>();
  }
  if (!name.empty()) {
    if (name == "torch.nn.modules.activation.Sigmoid") {
      return ScoreActivation::kSigmoid;
    }
    if (name == "torch.nn.modules.linear.Identity") {
      return ScoreActivation::kIdentity;
    }
    if (name == "torch.nn.modules.activation.Softmax") {
      return ScoreActivation::kSoftmax;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "the cross-encoder activation \"", name,
        "\" (config.json or config_sentence_transformers.json) is not "
        "supported; supported: torch.nn.modules.activation.Sigmoid, "
        "torch.nn.modules.linear.Identity, torch.nn.modules.activation."
        "Softmax"));
  }
  ConfigReader r(config);
  if (labels == 1 ||
      r.StringOr("problem_type", "") == "multi_label_classification") {
    return ScoreActivation::kSigmoid;
  }
  return ScoreActivation::kSoftmax;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Each layer's stored shapes chain from d_model; the last's rows are the
// labels.
absl::StatusOr<int64_t> CheckShapes(const HeadSource& h,
                                    const WeightSource& source,
                                    int64_t d_model) {
  int64_t width = d_model;
  for (const HeadLayerSource& l : h.layers) {
    auto expect = [&](const std::string& name,
                      std::vector<int64_t> shape) -> absl::Status {
      if (name.empty()) return absl::OkStatus();
      auto it = source.tensors().find(name);
      if (it == source.tensors().end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the classification head lacks tensor \"", name, "\""));
      }
      if (it->second.shape.size() != shape.size() ||
          (shape.size() == 2 && it->second.shape[1] != shape[1]) ||
          (shape.size() == 1 && it->second.shape[0] != shape[0])) {
        return absl::InvalidArgumentError(
            absl::StrCat("classification head tensor \"", name, "\" has shape ",
                         ShapeText(it->second.shape), "; expected ",
                         shape.size() == 2 ? absl::StrCat("[*, ", shape[1], "]")
                                           : ShapeText(shape)));
      }
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(expect(l.weight, {0, width}));
    const int64_t out = source.tensors().at(l.weight).shape[0];
    if (out < 1 || out > kMaxConfigSize) {
      return absl::InvalidArgumentError(absl::StrCat(
          "classification head tensor \"", l.weight, "\" has ", out, " rows"));
    }
    RETURN_IF_ERROR(expect(l.bias, {out}));
    RETURN_IF_ERROR(expect(l.norm_weight, {out}));
    RETURN_IF_ERROR(expect(l.norm_bias, {out}));
    width = out;
  }
  return width;
}

// `name`, or its legacy LayerNorm spelling (.gamma / .beta) where stored;
// empty when neither is.
std::string StoredOrLegacy(const WeightSource& source,
                           const std::string& name) {
  if (source.Has(name)) return name;
  for (const auto& [now, old] :
       {std::pair<std::string, std::string>{".weight", ".gamma"},
        {".bias", ".beta"}}) {
    if (absl::EndsWith(name, now)) {
      const std::string legacy = name.substr(0, name.size() - now.size()) + old;
      if (source.Has(legacy)) return legacy;
    }
  }
  return "";
}

// The family's masked-LM head as transformers' *ForMaskedLM stores it: a
// transform (dense, activation, LayerNorm) and a decoder whose weight is
// usually tied to the token embeddings. Empty layers: the family has none
// here.
absl::StatusOr<SparseHeadSource> MlmLayout(const json& config,
                                           const std::string& family,
                                           const WeightSource& source) {
  ConfigReader r(config);
  SparseHeadSource h;
  // dense, act, norm, eps; decoder weight and bias candidates.
  std::string dense, act, norm, decoder;
  std::vector<std::string> biases;
  double eps = 1e-12;
  if (family == "bert" || family == "jinabert" || family == "deberta-v2") {
    const std::string p = source.Has("lm_predictions.lm_head.dense.weight")
                              ? "lm_predictions.lm_head."
                              : "cls.predictions.transform.";
    dense = p + "dense";
    norm = p + "LayerNorm";
    act = r.StringOr("hidden_act", "gelu");
    eps = r.NumberOr("layer_norm_eps", family == "deberta-v2" ? 1e-7 : 1e-12);
    decoder = "cls.predictions.decoder";
    biases = {"cls.predictions.decoder.bias", "cls.predictions.bias",
              "lm_predictions.lm_head.bias"};
  } else if (family == "roberta" || family == "xlm-roberta" ||
             family == "camembert" || family == "mpnet") {
    dense = "lm_head.dense";
    norm = "lm_head.layer_norm";
    act = "gelu";
    eps = r.NumberOr("layer_norm_eps", 1e-5);
    decoder = "lm_head.decoder";
    biases = {"lm_head.decoder.bias", "lm_head.bias"};
  } else if (family == "distilbert") {
    dense = "vocab_transform";
    norm = "vocab_layer_norm";
    act = r.StringOr("activation", "gelu");
    decoder = "vocab_projector";
    biases = {"vocab_projector.bias"};
  } else if (family == "modernbert") {
    dense = "head.dense";
    norm = "head.norm";
    act = r.StringOr("classifier_activation", "gelu");
    eps = r.NumberOr("norm_eps", 1e-5);
    decoder = "decoder";
    biases = {"decoder.bias"};
  } else if (family == "electra") {
    dense = "generator_predictions.dense";
    norm = "generator_predictions.LayerNorm";
    act = "gelu";
    eps = r.NumberOr("layer_norm_eps", 1e-12);
    decoder = "generator_lm_head";
    biases = {"generator_lm_head.bias"};
  } else {
    return h;
  }
  if (!source.Has(dense + ".weight")) return h;
  ASSIGN_OR_RETURN(auto a, HeadAct(act));
  HeadLayerSource transform = Layer(source, dense, a);
  transform.norm_weight = StoredOrLegacy(source, norm + ".weight");
  transform.norm_bias = StoredOrLegacy(source, norm + ".bias");
  transform.norm_eps = eps;
  if (transform.norm_weight.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the masked-LM head has ", dense, ".weight but no ", norm, ".weight"));
  }
  HeadLayerSource out;
  if (source.Has(decoder + ".weight")) out.weight = decoder + ".weight";
  h.tied = out.weight.empty();
  for (const std::string& b : biases) {
    if (source.Has(b)) {
      out.bias = b;
      break;
    }
  }
  h.layers = {transform, out};
  return h;
}

absl::StatusOr<std::optional<SparseHeadSource>> CheckSparseHead(
    SparseHeadSource h, const WeightSource& source, int64_t d_model,
    int64_t vocab, const std::string& embedding_name) {
  HeadLayerSource& transform = h.layers[0];
  const HeadLayerSource& decoder = h.layers[1];
  auto shape = [&](const std::string& name) {
    return source.tensors().at(name).shape;
  };
  const std::vector<int64_t> t = shape(transform.weight);
  if (t.size() != 2 || t[1] != d_model) {
    return absl::InvalidArgumentError(absl::StrCat(
        "masked-LM head tensor \"", transform.weight, "\" has shape ",
        ShapeText(t), "; expected [*, ", d_model, "]"));
  }
  const int64_t width = t[0];
  for (const std::string* n :
       {&transform.bias, &transform.norm_weight, &transform.norm_bias}) {
    if (!n->empty() && shape(*n) != std::vector<int64_t>{width}) {
      return absl::InvalidArgumentError(
          absl::StrCat("masked-LM head tensor \"", *n, "\" has shape ",
                       ShapeText(shape(*n)), "; expected [", width, "]"));
    }
  }
  const std::string weight = h.tied ? embedding_name : decoder.weight;
  if (weight.empty()) {
    return absl::InvalidArgumentError(
        "the masked-LM head's decoder is tied to the token embeddings, "
        "which this family does not store as one table");
  }
  if (shape(weight) != std::vector<int64_t>{vocab, width}) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the masked-LM head's decoder \"", weight, "\" has shape ",
        ShapeText(shape(weight)), "; expected [", vocab, ", ", width, "]"));
  }
  if (!decoder.bias.empty() &&
      shape(decoder.bias) != std::vector<int64_t>{vocab}) {
    return absl::InvalidArgumentError(absl::StrCat(
        "masked-LM head tensor \"", decoder.bias, "\" has shape ",
        ShapeText(shape(decoder.bias)), "; expected [", vocab, "]"));
  }
  return h;
}

// Every tensor name `layers` read.
std::vector<std::string> LayerTensors(
    const std::vector<HeadLayerSource>& layers) {
  std::vector<std::string> names;
  for (const HeadLayerSource& l : layers) {
    for (const std::string* n :
         {&l.weight, &l.bias, &l.norm_weight, &l.norm_bias}) {
      if (!n->empty()) names.push_back(*n);
    }
  }
  return names;
}

// `layers` loaded in `dtype` (on the CPU).
absl::StatusOr<std::vector<DenseLayer>> LoadLayers(
    const std::vector<HeadLayerSource>& layers, WeightSource& source,
    at::ScalarType dtype) {
  std::vector<DenseLayer> out;
  for (const HeadLayerSource& l : layers) {
    DenseLayer d;
    d.act = l.act;
    d.norm_eps = l.norm_eps;
    for (const auto& [name, t] :
         {std::pair{&l.weight, &d.weight}, std::pair{&l.bias, &d.bias},
          std::pair{&l.norm_weight, &d.norm_weight},
          std::pair{&l.norm_bias, &d.norm_bias}}) {
      if (name->empty()) continue;
      ASSIGN_OR_RETURN(*t, source.Load(*name, dtype));
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

std::vector<std::string> SparseHeadSource::tensors() const {
  return LayerTensors(layers);
}

absl::StatusOr<std::optional<SparseHeadSource>> FindSparseHead(
    const json& config, const std::string& family, const WeightSource& source,
    int64_t d_model, int64_t vocab, const std::string& embedding_name,
    const std::optional<SpladeFiles>& splade) {
  bool masked_lm = false;
  if (config.contains("architectures") && config["architectures"].is_array()) {
    for (const json& a : config["architectures"]) {
      if (a.is_string() &&
          absl::EndsWith(a.get<std::string>(), "ForMaskedLM")) {
        masked_lm = true;
      }
    }
  }
  if (!splade.has_value() && !masked_lm) return std::nullopt;
  auto found = [&]() -> absl::StatusOr<std::optional<SparseHeadSource>> {
    ASSIGN_OR_RETURN(auto h, MlmLayout(config, family, source));
    if (h.layers.empty()) {
      if (!splade.has_value()) return std::nullopt;
      return absl::InvalidArgumentError(absl::StrCat(
          "modules.json has a SpladePooling module but the checkpoint has no "
          "masked-LM head this server reads for family \"",
          family, "\""));
    }
    return CheckSparseHead(std::move(h), source, d_model, vocab,
                           embedding_name);
  }();
  // Only a declared SPLADE model fails to load over its head; an MLM
  // checkpoint served as an embedder just lacks the sparse task.
  if (!found.ok() && !splade.has_value()) return std::nullopt;
  ASSIGN_OR_RETURN(auto head, std::move(found));
  if (head.has_value() && splade.has_value()) {
    head->max = splade->max;
    head->double_log = splade->double_log;
  }
  return head;
}

absl::StatusOr<SparseHead> LoadSparseHead(const SparseHeadSource& head,
                                          WeightSource& source,
                                          at::ScalarType dtype) {
  SparseHead out;
  out.pooling = head.max ? SparseHead::Pool::kMax : SparseHead::Pool::kSum;
  out.double_log = head.double_log;
  ASSIGN_OR_RETURN(out.layers, LoadLayers(head.layers, source, dtype));
  return out;
}

std::vector<std::string> HeadSource::tensors() const {
  return LayerTensors(layers);
}

absl::StatusOr<std::optional<HeadSource>> FindScoreHead(
    const json& config, const std::string& family, const WeightSource& source,
    int64_t d_model) {
  ASSIGN_OR_RETURN(auto head, Layout(config, family, source));
  if (head.layers.empty()) return std::nullopt;
  ASSIGN_OR_RETURN(auto labels, CheckShapes(head, source, d_model));
  ASSIGN_OR_RETURN(head.labels, Labels(config, labels));
  ASSIGN_OR_RETURN(head.activation, Activation(config, labels));
  return head;
}

absl::StatusOr<ScoreHead> LoadScoreHead(const HeadSource& head,
                                        WeightSource& source,
                                        at::ScalarType dtype) {
  ScoreHead out;
  out.pooling = head.pooling;
  out.labels = head.labels;
  out.activation = head.activation;
  out.pad_id = head.pad_id;
  ASSIGN_OR_RETURN(out.layers, LoadLayers(head.layers, source, dtype));
  return out;
}

}  // namespace encoder::model::hf

#include "server/model/hf/answer_head.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/hf/config_keys.h"
#include "server/model/hf/importer.h"
#include "server/model/hf/m3_heads.h"

namespace encoder::model::hf {
namespace {

// transformers' tie_word_embeddings where config.json leaves it out: the
// default of each family's config class.
bool TiedByDefault(const std::string& family) {
  static const auto* tied = new std::map<std::string, bool>{
      {"qwen2", false}, {"qwen3", false}, {"llama", false}, {"mistral", false}};
  auto it = tied->find(family);
  return it != tied->end() && it->second;
}

// The ids of `yes` and `no` in `dir`'s tokenizer.json.
absl::StatusOr<std::pair<int64_t, int64_t>> AnswerIds(const std::string& dir,
                                                      const std::string& yes,
                                                      const std::string& no,
                                                      int64_t vocab) {
  const std::string path = dir + "/tokenizer.json";
  ASSIGN_OR_RETURN(nlohmann::json tokenizer, ReadJsonFile(path));
  int64_t ids[2] = {-1, -1};
  const std::string* texts[2] = {&yes, &no};
  for (int k = 0; k < 2; ++k) {
    ids[k] = tokenizer.is_object() ? TokenizerJsonId(tokenizer, *texts[k]) : -1;
    if (ids[k] < 0 || ids[k] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the rerank template's answer token \"", *texts[k], "\" ",
          ids[k] < 0
              ? absl::StrCat("is not a token of ", path)
              : absl::StrCat("has id ", ids[k],
                             ", outside the model's vocabulary of ", vocab)));
    }
  }
  return std::pair{ids[0], ids[1]};
}

}  // namespace

absl::StatusOr<ScoreHead> LoadAnswerHead(
    const std::string& dir, const nlohmann::json& config,
    const std::string& family, WeightSource& source,
    const std::string& embedding_name, int64_t d_model, int64_t vocab,
    const std::string& yes, const std::string& no, at::ScalarType dtype) {
  if (family != "qwen2" && family != "qwen3" && family != "llama" &&
      family != "mistral") {
    return absl::InvalidArgumentError(absl::StrCat(
        "a rerank template's answer tokens are read from the language-model "
        "head of a qwen2, qwen3, llama or mistral checkpoint; this one is ",
        family,
        " (a checkpoint with a classification head needs no answer "
        "tokens: give the template without yes and no)"));
  }
  ASSIGN_OR_RETURN(auto ids, AnswerIds(dir, yes, no, vocab));
  std::string table = "lm_head.weight";
  if (!source.Has(table)) {
    const bool tied = ConfigReader(config).BoolOr("tie_word_embeddings",
                                                  TiedByDefault(family));
    if (!tied || embedding_name.empty()) {
      return absl::InvalidArgumentError(
          "the checkpoint stores no lm_head.weight and config.json does not "
          "tie it to the token embeddings (tie_word_embeddings); the rerank "
          "template's answer tokens need the language-model head");
    }
    table = embedding_name;
  }
  const std::vector<int64_t> shape = source.tensors().at(table).shape;
  if (shape != std::vector<int64_t>{vocab, d_model}) {
    return absl::InvalidArgumentError(absl::StrCat("the language-model head \"",
                                                   table, "\" is not [", vocab,
                                                   ", ", d_model, "]"));
  }
  ASSIGN_OR_RETURN(at::Tensor w, source.Load(table, at::kFloat));
  DenseLayer layer;
  layer.weight = (w[ids.first] - w[ids.second]).unsqueeze(0).to(dtype);
  ScoreHead head;
  head.pooling = Pooling::kLastToken;
  head.layers = {std::move(layer)};
  head.labels = {yes};
  head.activation = ScoreActivation::kSigmoid;
  return head;
}

}  // namespace encoder::model::hf

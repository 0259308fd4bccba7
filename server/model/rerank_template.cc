#include "server/model/rerank_template.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace encoder::model {

std::vector<std::string> BuiltinRerankTemplateNames() {
  return {"qwen3-reranker"};
}

std::optional<RerankTemplate> BuiltinRerankTemplate(const std::string& name) {
  if (name == "qwen3-reranker") {
    // Qwen3-Reranker's model card: a chat with a system turn that asks
    // for "yes" or "no", the user turn holding the instruction, query and
    // document, and the assistant turn opened after an empty thought.
    RerankTemplate t;
    t.name = name;
    t.prefix =
        "<|im_start|>system\nJudge whether the Document meets the "
        "requirements based on the Query and the Instruct provided. Note "
        "that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
        "<|im_start|>user\n";
    t.body =
        "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}";
    t.suffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
    t.instruction =
        "Given a web search query, retrieve relevant passages that answer "
        "the query";
    t.yes = "yes";
    t.no = "no";
    return t;
  }
  return std::nullopt;
}

std::string FormatRerankBody(const RerankTemplate& t,
                             const std::string& instruction,
                             const std::string& query,
                             const std::string& document) {
  // One pass, so a query that contains "{document}" stays as it is.
  return absl::StrReplaceAll(t.body, {{"{instruction}", instruction},
                                      {"{query}", query},
                                      {"{document}", document}});
}

absl::Status ValidateRerankTemplate(const RerankTemplate& t) {
  for (const char* slot : {"{query}", "{document}"}) {
    if (!absl::StrContains(t.body, slot)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rerank template body \"", t.body, "\" has no ", slot));
    }
  }
  if (t.yes.empty() != t.no.empty()) {
    return absl::InvalidArgumentError(
        "rerank template: give both answer tokens (yes and no) or neither");
  }
  if (!t.yes.empty() && t.yes == t.no) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rerank template: the answer tokens are both \"", t.yes, "\""));
  }
  return absl::OkStatus();
}

}  // namespace encoder::model

#include "server/tokenizer/legacy.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/tokenizer/hf_tokenizer.h"
#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

bool DoLowerCase(const fs::path& dir) {
  std::ifstream in(dir / "tokenizer_config.json");
  if (!in) return true;
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("do_lower_case") ||
      !j["do_lower_case"].is_boolean()) {
    return true;
  }
  return j["do_lower_case"].get<bool>();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadBertVocab(
    const std::string& dir, const LoadOptions& options) {
  const fs::path d(dir);
  std::ifstream in(d / "vocab.txt");
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open ", dir, "/vocab.txt"));
  json vocab = json::object();
  std::string line;
  int64_t id = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!vocab.contains(line)) vocab[line] = id;
    ++id;
  }
  const bool lower = DoLowerCase(d);
  json added = json::array();
  for (const char* special : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
    if (!vocab.contains(special)) continue;
    added.push_back({{"id", vocab[special]},
                     {"content", special},
                     {"special", true},
                     {"normalized", false}});
  }
  for (const char* needed : {"[UNK]", "[CLS]", "[SEP]"}) {
    if (!vocab.contains(needed)) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, "/vocab.txt has no ", needed, " token"));
    }
  }
  const json j = {
      {"added_tokens", added},
      {"normalizer",
       {{"type", "BertNormalizer"},
        {"lowercase", lower},
        {"strip_accents", nullptr}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"model",
       {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"vocab", vocab}}},
      {"post_processor",
       {{"type", "BertProcessing"},
        {"cls", {"[CLS]", vocab["[CLS]"]}},
        {"sep", {"[SEP]", vocab["[SEP]"]}}}},
      {"decoder", {{"type", "WordPiece"}}}};
  ASSIGN_OR_RETURN(auto tok, HfTokenizer::FromJson(j, options));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace encoder::tokenizer

#include "server/tokenizer/legacy.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/tokenizer/hf_tokenizer.h"
#include "server/tokenizer/sp_model.h"
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

// SentencePiece as a Tokenizer: ids straight from the model; with special
// tokens the model's </s> (when it has one) ends the sequence, as T5 does.
class SentencePieceTokenizer : public Tokenizer {
 public:
  absl::Status Load(const std::string& path) {
    std::string error;
    sp_ = SpModel::Load(path, &error);
    if (sp_ == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": not a SentencePiece model: ", error));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Encoding> Encode(std::string_view text,
                                  const EncodeOptions& options) const override {
    if (absl::Status st = ValidateUtf8(text); !st.ok()) return st;
    Encoding e;
    for (const SpModel::Piece& p : sp_->Encode(std::string(text))) {
      e.ids.push_back(p.id);
      e.tokens.push_back(p.piece);
      e.byte_offsets.push_back({p.begin, p.end});
      e.special_tokens_mask.push_back(0);
    }
    const bool eos = options.add_special_tokens && sp_->eos_id() >= 0;
    if (options.truncate && options.max_length > 0) {
      const size_t keep =
          std::max<int64_t>(0, options.max_length - (eos ? 1 : 0));
      if (e.size() > keep) {
        const size_t from =
            options.side == TruncationSide::kRight ? 0 : e.size() - keep;
        auto cut = [from, keep](auto* v) {
          v->erase(v->begin() + from + keep, v->end());
          v->erase(v->begin(), v->begin() + from);
        };
        cut(&e.ids);
        cut(&e.tokens);
        cut(&e.byte_offsets);
        cut(&e.special_tokens_mask);
      }
    }
    if (eos) {
      e.ids.push_back(sp_->eos_id());
      e.tokens.push_back(sp_->IdToPiece(sp_->eos_id()));
      e.byte_offsets.push_back({0, 0});
      e.special_tokens_mask.push_back(1);
    }
    e.type_ids.assign(e.size(), 0);
    std::vector<int64_t> char_at(text.size() + 1, 0);
    int64_t chars = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      char_at[i] = chars;
      if (i + 1 >= text.size() || (text[i + 1] & 0xc0) != 0x80) ++chars;
    }
    char_at[text.size()] = chars;
    for (const Offsets& o : e.byte_offsets) {
      e.char_offsets.push_back(
          {o.start == o.end ? o.start : char_at[o.start],
           o.start == o.end ? o.end : char_at[o.end - 1] + 1});
    }
    return e;
  }

  absl::StatusOr<std::string> Decode(const std::vector<int64_t>& ids,
                                     bool skip_special_tokens) const override {
    std::vector<int> kept;
    for (int64_t id : ids) {
      if (id < 0 || id >= sp_->size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", id, " is outside the vocabulary (size ",
                         sp_->size(), ")"));
      }
      if (skip_special_tokens && sp_->IsControl(static_cast<int>(id))) continue;
      kept.push_back(static_cast<int>(id));
    }
    return sp_->Decode(kept);
  }

  std::string kind() const override { return "sentencepiece"; }
  int64_t vocab_size() const override { return sp_->size(); }
  std::string Label(int64_t id) const override {
    if (id < 0 || id >= sp_->size()) return absl::StrCat("#", id);
    return sp_->IdToPiece(static_cast<int>(id));
  }

 private:
  std::unique_ptr<SpModel> sp_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadBertVocab(
    const std::string& dir) {
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
  auto tok = HfTokenizer::FromJson(j);
  if (!tok.ok()) return tok.status();
  return std::unique_ptr<Tokenizer>(std::move(*tok));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePiece(
    const std::string& path) {
  auto tok = std::make_unique<SentencePieceTokenizer>();
  if (absl::Status st = tok->Load(path); !st.ok()) return st;
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace encoder::tokenizer

// Reading tokenizer.json documents and model directories.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/tokenizer/hf_tokenizer.h"
#include "server/tokenizer/json_util.h"
#include "server/tokenizer/legacy.h"
#include "server/tokenizer/sentencepiece.h"

namespace encoder::tokenizer {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// A fixed padding length pads every encoding to it: bounded, so that a
// file cannot make each Encode allocate without end.
constexpr int64_t kMaxPadLength = int64_t{1} << 20;

bool Present(const json& j, const char* key) {
  return j.contains(key) && !j[key].is_null();
}

template <typename T, typename F>
absl::Status Build(const json& j, const char* key, F make,
                   std::unique_ptr<T>* out) {
  if (!Present(j, key)) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto made, make(j[key]));
  *out = std::move(made);
  return absl::OkStatus();
}

absl::Status ReadTruncationAndPadding(const json& j, Components* c) {
  if (Present(j, "truncation")) {
    const json& t = j["truncation"];
    c->truncation_max_length = IntegerOr(t, "max_length", 512);
    if (t.value("direction", "Right") == "Left") {
      c->truncation_side = TruncationSide::kLeft;
    }
  }
  if (Present(j, "padding")) {
    const json& p = j["padding"];
    if (p.contains("strategy") && p["strategy"].is_object() &&
        p["strategy"].contains("Fixed")) {
      c->pad_length =
          IntegerIn(p["strategy"]["Fixed"], 0, kMaxPadLength, "padding length");
    }
    c->pad_id = p.contains("pad_id") ? TokenIdOf(p["pad_id"]) : 0;
    c->pad_type_id = IntegerOr(p, "pad_type_id", 0);
    c->pad_token = p.value("pad_token", "[PAD]");
    c->pad_left = p.value("direction", "Right") == "Left";
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool IsLowercase(const json& n) {
  return n.is_object() && n.value("type", "") == "Lowercase";
}

// The normalizer with sentence-transformers' do_lower_case: a Lowercase
// first, unless the normalizer is one or a sequence holding one (as
// sentence-transformers' Transformer module decides; a BertNormalizer's own
// lowercase does not count).
json WithLowercase(const json& j) {
  const json lowercase = {{"type", "Lowercase"}};
  if (!Present(j, "normalizer")) return lowercase;
  const json& n = j["normalizer"];
  if (IsLowercase(n)) return n;
  if (n.is_object() && n.value("type", "") == "Sequence" &&
      n.contains("normalizers") && n["normalizers"].is_array()) {
    for (const json& part : n["normalizers"]) {
      if (IsLowercase(part)) return n;
    }
    json parts = json::array({lowercase});
    for (const json& part : n["normalizers"]) parts.push_back(part);
    return {{"type", "Sequence"}, {"normalizers", parts}};
  }
  return {{"type", "Sequence"}, {"normalizers", json::array({lowercase, n})}};
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::FromJson(
    const json& j, const LoadOptions& options) {
  Components c;
  try {
    if (!Present(j, "model")) {
      return absl::InvalidArgumentError("tokenizer.json: no \"model\"");
    }
    if (options.lowercase) {
      const json with = {{"normalizer", WithLowercase(j)}};
      RETURN_IF_ERROR(Build(with, "normalizer", MakeNormalizer, &c.normalizer));
    } else {
      RETURN_IF_ERROR(Build(j, "normalizer", MakeNormalizer, &c.normalizer));
    }
    RETURN_IF_ERROR(
        Build(j, "pre_tokenizer", MakePreTokenizer, &c.pre_tokenizer));
    RETURN_IF_ERROR(Build(j, "model", MakeModel, &c.model));
    RETURN_IF_ERROR(
        Build(j, "post_processor", MakePostProcessor, &c.post_processor));
    RETURN_IF_ERROR(Build(j, "decoder", MakeDecoder, &c.decoder));
    RETURN_IF_ERROR(ReadTruncationAndPadding(j, &c));
    if (Present(j, "added_tokens")) {
      for (const json& t : j["added_tokens"]) {
        AddedToken a;
        a.id = TokenIdOf(t.at("id"));
        a.content = t.at("content").get<std::string>();
        a.single_word = t.value("single_word", false);
        a.lstrip = t.value("lstrip", false);
        a.rstrip = t.value("rstrip", false);
        a.normalized = t.value("normalized", true);
        a.special = t.value("special", false);
        c.added_tokens.push_back(std::move(a));
      }
    }
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.json: ", e.what()));
  } catch (const InvalidJsonValue& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.json: ", e.what()));
  }
  return Create(std::move(c));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerJson(
    const std::string& path, const LoadOptions& options) {
  ASSIGN_OR_RETURN(auto text, ReadFile(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  }
  auto tok = HfTokenizer::FromJson(j, options);
  if (!tok.ok()) {
    return absl::Status(tok.status().code(),
                        absl::StrCat(path, ": ", tok.status().message()));
  }
  return std::unique_ptr<Tokenizer>(std::move(*tok));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromDirectory(
    const std::string& dir, const LoadOptions& options) {
  const fs::path d(dir);
  if (fs::exists(d / "tokenizer.json")) {
    return LoadTokenizerJson((d / "tokenizer.json").string(), options);
  }
  if (fs::exists(d / "vocab.txt")) return LoadBertVocab(dir, options);
  for (const char* name : {"spiece.model", "sentencepiece.bpe.model"}) {
    if (fs::exists(d / name)) {
      return LoadSentencePieceDirectory(dir, name, options);
    }
  }
  if (fs::exists(d / "source.spm")) {
    // MarianTokenizer takes its ids from vocab.json, not from the .spm.
    return absl::UnimplementedError(absl::StrCat(
        dir,
        ": Marian source.spm / vocab.json tokenizers are not read; give the "
        "model's tokenizer.json"));
  }
  return absl::NotFoundError(
      absl::StrCat(dir,
                   ": no tokenizer.json, vocab.txt, spiece.model or "
                   "sentencepiece.bpe.model"));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(
    const std::string& path, const LoadOptions& options) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return LoadTokenizerFromDirectory(path, options);
  }
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("tokenizer ", path, " not found"));
  }
  const fs::path p(path);
  const std::string name = p.filename().string();
  if (name == "spiece.model" || name == "sentencepiece.bpe.model") {
    return LoadSentencePieceDirectory(p.parent_path().string(), name, options);
  }
  return LoadTokenizerJson(path, options);
}

}  // namespace encoder::tokenizer

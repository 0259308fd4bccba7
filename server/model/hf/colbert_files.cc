#include "server/model/hf/colbert_files.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/hf/config_keys.h"
#include "server/model/hf/m3_heads.h"

namespace encoder::model::hf {
namespace {

using json = nlohmann::json;

constexpr const char* kFile = "config_sentence_transformers.json";
constexpr const char* kKeys[] = {
    "query_prefix",    "document_prefix",    "query_length",
    "document_length", "do_query_expansion", "attend_to_expansion_tokens",
    "skiplist_words"};

// Python's string.punctuation, one character a word: PyLate's skiplist
// when the file names none.
std::vector<std::string> Punctuation() {
  std::vector<std::string> words;
  for (char c : std::string("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")) {
    words.emplace_back(1, c);
  }
  return words;
}

bool Given(const json& cst, const char* key) {
  return cst.is_object() && cst.contains(key) && !cst[key].is_null();
}

absl::Status ReadText(const json& cst, const std::string& path, const char* key,
                      std::string* out) {
  if (!Given(cst, key)) return absl::OkStatus();
  if (!cst[key].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", key, " must be a string or null"));
  }
  *out = cst[key].get<std::string>();
  return absl::OkStatus();
}

absl::Status ReadLength(const json& cst, const std::string& path,
                        const char* key, int64_t* out) {
  if (!Given(cst, key)) return absl::OkStatus();
  if (!cst[key].is_number_integer() || cst[key].get<int64_t>() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", key, " must be an integer >= 2 or null"));
  }
  *out = cst[key].get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadFlag(const json& cst, const std::string& path, const char* key,
                      bool* out) {
  if (!Given(cst, key)) return absl::OkStatus();
  if (!cst[key].is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", key, " must be true, false or null"));
  }
  *out = cst[key].get<bool>();
  return absl::OkStatus();
}

absl::Status ReadFramingKeys(const json& cst, const std::string& path,
                             ColbertFraming* f) {
  f->query_prefix = "[Q] ";
  f->document_prefix = "[D] ";
  f->query_length = 32;
  f->document_length = 180;
  RETURN_IF_ERROR(ReadText(cst, path, "query_prefix", &f->query_prefix));
  RETURN_IF_ERROR(ReadText(cst, path, "document_prefix", &f->document_prefix));
  RETURN_IF_ERROR(ReadLength(cst, path, "query_length", &f->query_length));
  RETURN_IF_ERROR(
      ReadLength(cst, path, "document_length", &f->document_length));
  RETURN_IF_ERROR(
      ReadFlag(cst, path, "do_query_expansion", &f->query_expansion));
  RETURN_IF_ERROR(ReadFlag(cst, path, "attend_to_expansion_tokens",
                           &f->attend_to_expansion));
  // Without expansion there is nothing to attend to (PyLate's rule).
  if (!f->query_expansion) f->attend_to_expansion = false;
  f->skiplist_words = Punctuation();
  if (Given(cst, "skiplist_words")) {
    const json& words = cst["skiplist_words"];
    if (!words.is_array() ||
        !std::all_of(words.begin(), words.end(),
                     [](const json& w) { return w.is_string(); })) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": skiplist_words must be a list of strings or null"));
    }
    f->skiplist_words.clear();
    for (const json& w : words)
      f->skiplist_words.push_back(w.get<std::string>());
  }
  return absl::OkStatus();
}

// The ids of the prefixes, the expansion token and the skiplist words.
absl::Status ResolveIds(const std::string& dir, ColbertFraming* f) {
  const std::string tokenizer_path = dir + "/tokenizer.json";
  ASSIGN_OR_RETURN(json tokenizer, ReadJsonFile(tokenizer_path));
  if (!tokenizer.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir,
        ": a ColBERT model's markers and skiplist are looked up in "
        "tokenizer.json, which it lacks"));
  }
  // transformers reads special_tokens_map.json over tokenizer_config.json.
  ASSIGN_OR_RETURN(json map, ReadJsonFile(dir + "/special_tokens_map.json"));
  ASSIGN_OR_RETURN(json config, ReadJsonFile(dir + "/tokenizer_config.json"));
  const json files = json::array({map, config});
  auto id_of = [&](const std::string& text) {
    return text.empty() ? int64_t{-1} : TokenizerJsonId(tokenizer, text);
  };
  for (auto [text, id] :
       {std::pair{&f->query_prefix, &f->query_prefix_id},
        std::pair{&f->document_prefix, &f->document_prefix_id}}) {
    *id = id_of(*text);
    if (!text->empty() && *id < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, "/", kFile, ": the marker \"", *text, "\" is not a token of ",
          tokenizer_path, " (PyLate adds it to the tokenizer it saves)"));
    }
  }
  // PyLate pads queries with the mask token, else the end token, else the
  // padding token.
  for (const char* key : {"mask_token", "eos_token", "pad_token"}) {
    f->expansion_id = id_of(TokenText(files, key));
    if (f->expansion_id >= 0) break;
  }
  if (f->query_expansion && f->expansion_id < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir,
        ": query expansion needs a mask, end or padding token, and the "
        "tokenizer files name none with an id"));
  }
  const int64_t unk = id_of(TokenText(files, "unk_token"));
  for (const std::string& word : f->skiplist_words) {
    const int64_t id = id_of(word);
    if (id >= 0) {
      f->skiplist_ids.push_back(id);
    } else if (unk >= 0) {
      f->skiplist_ids.push_back(unk);
    }
  }
  std::sort(f->skiplist_ids.begin(), f->skiplist_ids.end());
  f->skiplist_ids.erase(
      std::unique(f->skiplist_ids.begin(), f->skiplist_ids.end()),
      f->skiplist_ids.end());
  return absl::OkStatus();
}

}  // namespace

bool IsPylateModule(const std::string& type) {
  return absl::StartsWith(type, "pylate.");
}

absl::StatusOr<std::optional<ColbertFraming>> ReadColbertFraming(
    const std::string& dir, bool pylate) {
  const std::string path = absl::StrCat(dir, "/", kFile);
  ASSIGN_OR_RETURN(const json cst, ReadJsonFile(path));
  for (const char* key : kKeys) pylate |= Given(cst, key);
  if (!pylate) return std::nullopt;
  ColbertFraming f;
  RETURN_IF_ERROR(ReadFramingKeys(cst, path, &f));
  RETURN_IF_ERROR(ResolveIds(dir, &f));
  return f;
}

}  // namespace encoder::model::hf

#include "server/tokenizer/sentencepiece.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/tokenizer/added_vocabulary.h"
#include "server/tokenizer/hf_tokenizer.h"
#include "server/tokenizer/normalized_string.h"
#include "server/tokenizer/pair_encoding.h"
#include "server/tokenizer/spm_module.h"
#include "server/tokenizer/unicode.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define ENCODER_SPM_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ENCODER_SPM_SANITIZED 1
#endif

namespace encoder::tokenizer {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr char kModuleName[] = "libencoder_spm.so";

// The module's entry points.
struct SpmApi {
  decltype(&encoder_spm_load) load;
  decltype(&encoder_spm_free) free_model;
  decltype(&encoder_spm_free_string) free_string;
  decltype(&encoder_spm_piece_size) piece_size;
  decltype(&encoder_spm_id_to_piece) id_to_piece;
  decltype(&encoder_spm_piece_type) piece_type;
  decltype(&encoder_spm_unk_id) unk_id;
  decltype(&encoder_spm_eos_id) eos_id;
  decltype(&encoder_spm_piece_to_id) piece_to_id;
  decltype(&encoder_spm_encode) encode;
  decltype(&encoder_spm_decode) decode;
};

// Where the module may be: next to the executable, in ../lib/encoder
// (an installed layout), and where this build wrote it.
std::vector<std::string> ModuleCandidates() {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / kModuleName).string());
    out.push_back(
        (exe.parent_path() / ".." / "lib" / "encoder" / kModuleName).string());
  }
#ifdef ENCODER_SPM_MODULE_PATH
  out.push_back(ENCODER_SPM_MODULE_PATH);
#endif
  return out;
}

template <typename F>
bool Symbol(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  return *out != nullptr;
}

absl::StatusOr<SpmApi> OpenModule() {
#ifdef ENCODER_SPM_SANITIZED
  // The sanitizer runtimes refuse RTLD_DEEPBIND, and without it the
  // library's protobuf copy would bind to the server's.
  return absl::UnimplementedError(
      "SentencePiece models are not available in sanitizer builds");
#else
  std::vector<std::string> tried;
  for (const std::string& path : ModuleCandidates()) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      tried.push_back(path);
      continue;
    }
    // RTLD_LOCAL keeps the library's symbols out of the server's lookups,
    // RTLD_DEEPBIND makes the library resolve its own symbols first.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      const char* why = dlerror();
      return absl::FailedPreconditionError(
          absl::StrCat("cannot load ", path, ": ", why ? why : "dlopen failed",
                       " (is libsentencepiece0 installed?)"));
    }
    decltype(&encoder_spm_abi_version) version;
    SpmApi api;
    const bool all =
        Symbol(handle, "encoder_spm_abi_version", &version) &&
        Symbol(handle, "encoder_spm_load", &api.load) &&
        Symbol(handle, "encoder_spm_free", &api.free_model) &&
        Symbol(handle, "encoder_spm_free_string", &api.free_string) &&
        Symbol(handle, "encoder_spm_piece_size", &api.piece_size) &&
        Symbol(handle, "encoder_spm_id_to_piece", &api.id_to_piece) &&
        Symbol(handle, "encoder_spm_piece_type", &api.piece_type) &&
        Symbol(handle, "encoder_spm_unk_id", &api.unk_id) &&
        Symbol(handle, "encoder_spm_eos_id", &api.eos_id) &&
        Symbol(handle, "encoder_spm_piece_to_id", &api.piece_to_id) &&
        Symbol(handle, "encoder_spm_encode", &api.encode) &&
        Symbol(handle, "encoder_spm_decode", &api.decode);
    if (!all || version() != ENCODER_SPM_ABI_VERSION) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is not a SentencePiece module of this server's version"));
    }
    return api;  // never closed: tokenizers live as long as the process
  }
  return absl::UnimplementedError(absl::StrCat(
      "SentencePiece support is not installed (", kModuleName,
      " not found; looked at ", absl::StrJoin(tried, ", "),
      "); build with libsentencepiece-dev or give the model's tokenizer.json"));
#endif
}

absl::StatusOr<const SpmApi*> Module() {
  static const absl::StatusOr<SpmApi>* api =
      new absl::StatusOr<SpmApi>(OpenModule());
  if (!api->ok()) return api->status();
  return &**api;
}

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A JSON file of the model directory, or an empty object when absent.
absl::StatusOr<json> ReadJson(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return json::object();
  ASSIGN_OR_RETURN(auto text, ReadFile(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.string(), ": not a JSON object"));
  }
  return j;
}

// A special token entry: "text" or {"content": "text", ...}.
std::optional<std::string> TokenContent(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) {
    return j["content"].get<std::string>();
  }
  return std::nullopt;
}

std::string StringOr(const json& config, const char* key,
                     const std::string& fallback) {
  if (!config.contains(key)) return fallback;
  return TokenContent(config[key]).value_or(fallback);
}

struct Settings {
  SentencePieceFamily family;
  bool lower = false;
  std::optional<int64_t> model_max_length;
  std::string eos = "</s>", unk = "<unk>", pad = "<pad>";
  int64_t extra_ids = 0;
  std::vector<std::string> additional;  // additional_special_tokens
  std::vector<AddedToken> declared;     // added_tokens_decoder
};

// At most this many <extra_id_N> sentinels (T5 checkpoints have 100).
constexpr int64_t kMaxExtraIds = 1 << 16;

absl::StatusOr<Settings> ReadSettingsOrThrow(const fs::path& dir,
                                             SentencePieceFamily family) {
  ASSIGN_OR_RETURN(json config, ReadJson(dir / "tokenizer_config.json"));
  ASSIGN_OR_RETURN(json map, ReadJson(dir / "special_tokens_map.json"));
  ASSIGN_OR_RETURN(json model_config, ReadJson(dir / "config.json"));
  Settings s;
  s.family = family;
  const bool has_class = config.contains("tokenizer_class") &&
                         config["tokenizer_class"].is_string();
  if (!has_class && model_config.contains("model_type") &&
      model_config["model_type"].is_string()) {
    // Without a tokenizer_class, the checkpoint's model_type tells the
    // family: ALBERT, XLNet, Pegasus, CamemBERT, mBART ... ship the same
    // file names with other ids or templates.
    const std::string type = model_config["model_type"].get<std::string>();
    const bool ok = family == SentencePieceFamily::kT5
                        ? (type == "t5" || type == "mt5" || type == "umt5")
                        : (type == "xlm-roberta" || type == "xlm-roberta-xl");
    if (!ok) {
      return absl::UnimplementedError(absl::StrCat(
          "config.json names model_type ", type,
          "; from a .model file only T5 (spiece.model) and XLM-RoBERTa "
          "(sentencepiece.bpe.model) tokenizers are read; give the model's "
          "tokenizer.json"));
    }
  }
  if (has_class) {
    const std::string cls = config["tokenizer_class"].get<std::string>();
    const bool t5 = cls == "T5Tokenizer" || cls == "T5TokenizerFast" ||
                    cls == "MT5Tokenizer" || cls == "MT5TokenizerFast";
    const bool xlmr =
        cls == "XLMRobertaTokenizer" || cls == "XLMRobertaTokenizerFast";
    if ((family == SentencePieceFamily::kT5 && !t5) ||
        (family == SentencePieceFamily::kXlmRoberta && !xlmr)) {
      return absl::UnimplementedError(absl::StrCat(
          "tokenizer_config.json names tokenizer_class ", cls,
          "; from a .model file only T5Tokenizer (spiece.model) and "
          "XLMRobertaTokenizer (sentencepiece.bpe.model) are read; give the "
          "model's tokenizer.json"));
    }
  }
  if (config.contains("do_lower_case") &&
      config["do_lower_case"].is_boolean()) {
    s.lower = config["do_lower_case"].get<bool>();
  }
  // Hugging Face writes 1e30 for "no limit".
  if (config.contains("model_max_length") &&
      config["model_max_length"].is_number_integer() &&
      config["model_max_length"].get<int64_t>() > 0) {
    s.model_max_length = config["model_max_length"].get<int64_t>();
  }
  for (const json* j : {&map, &config}) {  // tokenizer_config.json wins
    s.eos = StringOr(*j, "eos_token", s.eos);
    s.unk = StringOr(*j, "unk_token", s.unk);
    s.pad = StringOr(*j, "pad_token", s.pad);
    if (j->contains("additional_special_tokens") &&
        (*j)["additional_special_tokens"].is_array()) {
      s.additional.clear();
      for (const json& t : (*j)["additional_special_tokens"]) {
        if (auto c = TokenContent(t)) s.additional.push_back(*c);
      }
    }
  }
  static const std::regex kSentinel("<extra_id_[0-9]+>");
  if (config.contains("extra_ids") && config["extra_ids"].is_number_integer()) {
    s.extra_ids = std::max<int64_t>(0, config["extra_ids"].get<int64_t>());
    if (s.extra_ids > kMaxExtraIds) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer_config.json: extra_ids ", s.extra_ids,
                       " is more than ", kMaxExtraIds));
    }
  } else {
    absl::flat_hash_set<std::string> sentinels;
    for (const std::string& t : s.additional) {
      if (std::regex_match(t, kSentinel)) sentinels.insert(t);
    }
    s.extra_ids = static_cast<int64_t>(sentinels.size());
  }
  if (family != SentencePieceFamily::kT5) s.extra_ids = 0;
  if (config.contains("added_tokens_decoder") &&
      config["added_tokens_decoder"].is_object()) {
    for (const auto& [key, t] : config["added_tokens_decoder"].items()) {
      AddedToken a;
      try {
        size_t used = 0;
        a.id = std::stoll(key, &used);
        if (used != key.size() || a.id < 0) throw std::invalid_argument(key);
      } catch (const std::exception&) {
        return absl::InvalidArgumentError(
            absl::StrCat("tokenizer_config.json: added_tokens_decoder key '",
                         key, "' is not a token id"));
      }
      auto content = TokenContent(t);
      if (!t.is_object() || !content || content->empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("tokenizer_config.json: added_tokens_decoder ", key,
                         " has no content"));
      }
      a.content = *content;
      a.lstrip = t.value("lstrip", false);
      a.rstrip = t.value("rstrip", false);
      a.single_word = t.value("single_word", false);
      a.special = t.value("special", true);
      a.normalized = false;
      s.declared.push_back(std::move(a));
    }
  }
  return s;
}

absl::StatusOr<Settings> ReadSettings(const fs::path& dir,
                                      SentencePieceFamily family) {
  try {
    return ReadSettingsOrThrow(dir, family);
  } catch (const json::exception& e) {  // a value of the wrong kind
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer configuration: ", e.what()));
  } catch (const std::regex_error& e) {
    return absl::InternalError(e.what());
  }
}

class SentencePieceTokenizer : public Tokenizer {
 public:
  SentencePieceTokenizer(const SpmApi* api, EncoderSpmModel* model)
      : api_(api), model_(model) {}
  ~SentencePieceTokenizer() override { api_->free_model(model_); }

  absl::Status Init(const Settings& s, const std::string& path);

  absl::StatusOr<Encoding> Encode(std::string_view text,
                                  const EncodeOptions& options) const override;
  // T5: A </s> B </s>; XLM-R: <s> A </s></s> B </s>; every type id 0, as
  // the slow tokenizers' create_token_type_ids_from_sequences gives them.
  absl::StatusOr<Encoding> EncodePair(
      std::string_view first, std::string_view second,
      const EncodeOptions& options) const override;
  absl::StatusOr<std::string> Decode(const std::vector<int64_t>& ids,
                                     bool skip_special_tokens) const override;
  std::string kind() const override { return "sentencepiece"; }
  int64_t vocab_size() const override { return vocab_size_; }
  std::string Label(int64_t id) const override;
  bool IsSpecial(int64_t id) const override {
    return special_ids_.contains(id);
  }

 private:
  std::string PieceOf(int32_t spm_id) const {
    size_t size = 0;
    const char* p = api_->id_to_piece(model_, spm_id, &size);
    return std::string(p, size);
  }
  // The piece id of `piece`, or nullopt when the model lacks it.
  std::optional<int32_t> Find(const std::string& piece) const {
    const int32_t id = api_->piece_to_id(model_, piece.data(), piece.size());
    if (id < 0 || id >= spm_size_ || PieceOf(id) != piece) return std::nullopt;
    return id;
  }
  // Our id of a piece id the encoder returned.
  int64_t FromSpm(int32_t spm_id) const;
  // The piece id of one of our ids, or nullopt for ids with no piece.
  std::optional<int32_t> ToSpm(int64_t id) const;
  void AddSpecial(int64_t id, const std::string& content, bool lstrip = false);
  absl::Status EncodeText(const NormalizedString& text, Encoding* e) const;
  // The tokens of `text` (special tokens matched first), without template.
  absl::StatusOr<Encoding> Tokenize(std::string_view text) const;
  // The max_length truncation applies with, or nullopt.
  std::optional<int64_t> MaxLength(const EncodeOptions& options) const;
  // Special tokens the template adds to one text (`pair`: two).
  int64_t AddedTokens(bool pair) const;
  void Truncate(const EncodeOptions& options, Encoding* e) const;
  absl::Status TruncatePair(const EncodeOptions& options, Encoding* first,
                            Encoding* second) const;
  // Sequence `sequence` (0 or 1) of the input: mask, sequence ids, the
  // template's tokens around it, type ids and character offsets.
  void Finish(int8_t sequence, std::string_view text,
              const EncodeOptions& options, Encoding* e) const;
  void AddTemplate(int8_t sequence, Encoding* e) const;

  const SpmApi* api_;
  EncoderSpmModel* model_;
  SentencePieceFamily family_ = SentencePieceFamily::kT5;
  int32_t spm_size_ = 0;
  int32_t spm_unk_ = -1;
  bool lower_ = false;
  std::optional<int64_t> model_max_length_;
  int64_t vocab_size_ = 0;
  int64_t eos_ = 0;  // T5's </s>
  // Tokens matched in the text before SentencePiece runs (the special ones).
  std::vector<AddedToken> added_tokens_;
  AddedVocabulary added_;
  absl::flat_hash_map<int64_t, std::string> names_;  // ids without a piece
  absl::flat_hash_set<int64_t> special_ids_;
};

constexpr int64_t kCls = 0, kPad = 1, kSep = 2, kUnk = 3;  // fairseq ids

int64_t SentencePieceTokenizer::FromSpm(int32_t spm_id) const {
  if (family_ == SentencePieceFamily::kT5) return spm_id;
  // XLMRobertaTokenizer: pieces shift by one; SentencePiece's unknown
  // (piece 0) is fairseq's <unk>.
  if (spm_id == 0 || spm_id == spm_unk_) return kUnk;
  return int64_t{spm_id} + 1;
}

std::optional<int32_t> SentencePieceTokenizer::ToSpm(int64_t id) const {
  if (names_.contains(id)) return std::nullopt;
  const int64_t spm =
      family_ == SentencePieceFamily::kT5 ? id : id - 1;  // fairseq offset
  if (spm < 0 || spm >= spm_size_) return std::nullopt;
  return static_cast<int32_t>(spm);
}

void SentencePieceTokenizer::AddSpecial(int64_t id, const std::string& content,
                                        bool lstrip) {
  for (AddedToken& t : added_tokens_) {
    if (t.content == content) return;
  }
  AddedToken t;
  t.id = id;
  t.content = content;
  t.lstrip = lstrip;
  t.special = true;
  added_tokens_.push_back(t);
  special_ids_.insert(id);
}

absl::Status SentencePieceTokenizer::Init(const Settings& s,
                                          const std::string& path) {
  family_ = s.family;
  lower_ = s.lower;
  model_max_length_ = s.model_max_length;
  spm_size_ = api_->piece_size(model_);
  spm_unk_ = api_->unk_id(model_);
  // Declared tokens first: their lstrip / rstrip settings win.
  for (const AddedToken& t : s.declared) {
    added_tokens_.push_back(t);
    if (t.special) special_ids_.insert(t.id);
    if (!ToSpm(t.id) || PieceOf(*ToSpm(t.id)) != t.content) {
      names_[t.id] = t.content;
    }
  }
  if (family_ == SentencePieceFamily::kT5) {
    vocab_size_ = int64_t{spm_size_} + s.extra_ids;
    const auto eos = Find(s.eos);
    if (!eos) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " has no piece ", s.eos, " (the end-of-sequence token)"));
    }
    eos_ = *eos;
    AddSpecial(eos_, s.eos);
    for (const std::string& name : {s.unk, s.pad}) {
      if (auto id = Find(name)) AddSpecial(*id, name);
    }
    // <extra_id_N> counts down from the last id.
    for (int64_t n = 0; n < s.extra_ids; ++n) {
      const int64_t id = vocab_size_ - 1 - n;
      const std::string name = absl::StrCat("<extra_id_", n, ">");
      names_.emplace(id, name);
      AddSpecial(id, name);
    }
  } else {
    vocab_size_ = int64_t{spm_size_} + 2;
    const int64_t mask = int64_t{spm_size_} + 1;
    for (const auto& [id, name] :
         std::initializer_list<std::pair<int64_t, const char*>>{
             {kCls, "<s>"}, {kPad, "<pad>"}, {kSep, "</s>"}, {kUnk, "<unk>"}}) {
      names_.emplace(id, name);
      AddSpecial(id, name);
    }
    names_.emplace(mask, "<mask>");
    // As XLMRobertaTokenizer: the mask takes the space before it.
    AddSpecial(mask, "<mask>", /*lstrip=*/true);
  }
  for (const std::string& name : s.additional) {
    if (std::any_of(added_tokens_.begin(), added_tokens_.end(),
                    [&](const AddedToken& t) { return t.content == name; })) {
      continue;
    }
    if (auto id = Find(name)) AddSpecial(FromSpm(*id), name);
  }
  for (const AddedToken& t : added_tokens_) {
    vocab_size_ = std::max(vocab_size_, t.id + 1);
  }
  std::vector<std::string> contents;
  for (const AddedToken& t : added_tokens_) contents.push_back(t.content);
  added_ = AddedVocabulary(added_tokens_, std::move(contents));
  return absl::OkStatus();
}

std::string SentencePieceTokenizer::Label(int64_t id) const {
  if (auto it = names_.find(id); it != names_.end()) return it->second;
  if (auto spm = ToSpm(id)) return PieceOf(*spm);
  return absl::StrCat("#", id);
}

struct Collected {
  std::vector<int32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> spans;
};

void Collect(void* ctx, int32_t id, uint32_t begin, uint32_t end) {
  auto* c = static_cast<Collected*>(ctx);
  c->ids.push_back(id);
  c->spans.emplace_back(begin, end);
}

absl::Status SentencePieceTokenizer::EncodeText(const NormalizedString& text,
                                                Encoding* e) const {
  Collected c;
  char* error = nullptr;
  const std::string& s = text.get();
  if (api_->encode(model_, s.data(), s.size(), &Collect, &c, &error) != 0) {
    const std::string why = error ? error : "unknown error";
    api_->free_string(error);
    return absl::InternalError(absl::StrCat("SentencePiece: ", why));
  }
  for (size_t i = 0; i < c.ids.size(); ++i) {
    const int64_t id = FromSpm(c.ids[i]);
    const auto [begin, end] = c.spans[i];
    const NormalizedString::Span span = text.OriginalSpan(begin, end);
    e->ids.push_back(id);
    e->tokens.push_back(Label(id));
    e->byte_offsets.push_back({span.first, span.second});
  }
  return absl::OkStatus();
}

std::optional<int64_t> SentencePieceTokenizer::MaxLength(
    const EncodeOptions& options) const {
  if (!options.truncate) return std::nullopt;
  if (options.max_length > 0) return options.max_length;
  return model_max_length_;
}

int64_t SentencePieceTokenizer::AddedTokens(bool pair) const {
  const int64_t one = family_ == SentencePieceFamily::kT5 ? 1 : 2;
  return pair ? 2 * one : one;
}

void SentencePieceTokenizer::Truncate(const EncodeOptions& options,
                                      Encoding* e) const {
  const std::optional<int64_t> max_length = MaxLength(options);
  if (!max_length) return;
  const int64_t added = options.add_special_tokens ? AddedTokens(false) : 0;
  KeepTokens(static_cast<size_t>(std::max<int64_t>(0, *max_length - added)),
             options.side, e);
}

absl::Status SentencePieceTokenizer::TruncatePair(const EncodeOptions& options,
                                                  Encoding* first,
                                                  Encoding* second) const {
  const std::optional<int64_t> max_length = MaxLength(options);
  if (!max_length) return absl::OkStatus();
  const int64_t added = options.add_special_tokens ? AddedTokens(true) : 0;
  RETURN_IF_ERROR(CheckPairRoom(*max_length, added));
  const PairLengths keep = SlowLongestFirst(
      first->size(), second->size(), static_cast<size_t>(*max_length - added));
  KeepTokens(keep.first, options.side, first);
  KeepTokens(keep.second, options.side, second);
  return absl::OkStatus();
}

void SentencePieceTokenizer::AddTemplate(int8_t sequence, Encoding* e) const {
  auto add = [this, e](bool front, int64_t id) {
    const auto at = [front](auto* v) { return front ? v->begin() : v->end(); };
    e->ids.insert(at(&e->ids), id);
    e->tokens.insert(at(&e->tokens), Label(id));
    e->byte_offsets.insert(at(&e->byte_offsets), Offsets{0, 0});
    e->special_tokens_mask.insert(at(&e->special_tokens_mask), 1);
    e->sequence_ids.insert(at(&e->sequence_ids), -1);
  };
  if (family_ == SentencePieceFamily::kT5) {
    // T5Tokenizer adds </s> unless the sequence already ends with it.
    if (e->ids.empty() || e->ids.back() != eos_) add(false, eos_);
  } else {
    add(true, sequence == 0 ? kCls : kSep);
    add(false, kSep);
  }
}

void SentencePieceTokenizer::Finish(int8_t sequence, std::string_view text,
                                    const EncodeOptions& options,
                                    Encoding* e) const {
  e->special_tokens_mask.assign(e->size(), 0);
  SetSequenceId(sequence, e);
  if (options.add_special_tokens) AddTemplate(sequence, e);
  e->type_ids.assign(e->size(), 0);
  ComputeCharOffsets(text, e);
}

absl::StatusOr<Encoding> SentencePieceTokenizer::Tokenize(
    std::string_view text) const {
  RETURN_IF_ERROR(ValidateUtf8(text));
  if (text.size() > UINT32_MAX / 2) {
    return absl::InvalidArgumentError("text too long for SentencePiece");
  }
  std::vector<Piece> pieces;
  pieces.push_back({NormalizedString(text, 0), std::nullopt});
  added_.Split(false, &pieces);
  Encoding e;
  for (Piece& p : pieces) {
    if (p.text.empty()) continue;
    if (p.id) {
      const NormalizedString::Span span =
          p.text.OriginalSpan(0, p.text.get().size());
      e.ids.push_back(*p.id);
      e.tokens.push_back(Label(*p.id));
      e.byte_offsets.push_back({span.first, span.second});
      continue;
    }
    if (lower_) {
      p.text.MapChars(
          [](char32_t c, std::u32string* out) { *out = ToLowerFull(c); });
    }
    RETURN_IF_ERROR(EncodeText(p.text, &e));
  }
  return e;
}

absl::StatusOr<Encoding> SentencePieceTokenizer::Encode(
    std::string_view text, const EncodeOptions& options) const {
  ASSIGN_OR_RETURN(Encoding e, Tokenize(text));
  Truncate(options, &e);
  Finish(0, text, options, &e);
  e.sequence_ids.clear();
  return e;
}

absl::StatusOr<Encoding> SentencePieceTokenizer::EncodePair(
    std::string_view first, std::string_view second,
    const EncodeOptions& options) const {
  ASSIGN_OR_RETURN(Encoding a, Tokenize(first));
  ASSIGN_OR_RETURN(Encoding b, Tokenize(second));
  RETURN_IF_ERROR(TruncatePair(options, &a, &b));
  Finish(0, first, options, &a);
  Finish(1, second, options, &b);
  Append(std::move(b), &a);
  return a;
}

absl::StatusOr<std::string> SentencePieceTokenizer::Decode(
    const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  // As T5Tokenizer.convert_tokens_to_string: runs of pieces go through
  // SentencePiece, tokens without a piece (and special ones) are written
  // as they are, after a space.
  std::string out;
  std::vector<int32_t> run;
  auto flush = [&]() -> absl::Status {
    if (run.empty()) return absl::OkStatus();
    size_t size = 0;
    char* error = nullptr;
    char* text = api_->decode(model_, run.data(), run.size(), &size, &error);
    if (text == nullptr) {
      const std::string why = error ? error : "unknown error";
      api_->free_string(error);
      return absl::InternalError(absl::StrCat("SentencePiece: ", why));
    }
    out.append(text, size);
    api_->free_string(text);
    run.clear();
    return absl::OkStatus();
  };
  bool previous_special = false;
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size_) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary (size ",
                       vocab_size_, ")"));
    }
    const bool special = special_ids_.contains(id);
    if (skip_special_tokens && special) continue;
    const auto spm = ToSpm(id);
    if (special || !spm) {
      if (!previous_special) out += ' ';
      RETURN_IF_ERROR(flush());
      out += Label(id);
      previous_special = true;
      continue;
    }
    run.push_back(*spm);
    previous_special = false;
  }
  RETURN_IF_ERROR(flush());
  const size_t first = out.find_first_not_of(" \t\n\r\f\v");
  if (first == std::string::npos) return std::string();
  const size_t last = out.find_last_not_of(" \t\n\r\f\v");
  return out.substr(first, last - first + 1);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePieceDirectory(
    const std::string& dir, const std::string& file,
    const LoadOptions& options) {
  const fs::path d(dir);
  const fs::path path = d / file;
  const SentencePieceFamily family = file == "sentencepiece.bpe.model"
                                         ? SentencePieceFamily::kXlmRoberta
                                         : SentencePieceFamily::kT5;
  auto named = [&path](const absl::Status& s) {
    return absl::Status(s.code(),
                        absl::StrCat(path.string(), ": ", s.message()));
  };
  auto settings = ReadSettings(d, family);
  if (!settings.ok()) return named(settings.status());
  settings->lower = settings->lower || options.lowercase;
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  auto api = Module();
  if (!api.ok()) return named(api.status());
  char* error = nullptr;
  EncoderSpmModel* model = (*api)->load(bytes.data(), bytes.size(), &error);
  if (model == nullptr) {
    const std::string why = error ? error : "unknown error";
    (*api)->free_string(error);
    return absl::InvalidArgumentError(absl::StrCat(
        path.string(), ": not a valid SentencePiece model (", why, ")"));
  }
  auto tok = std::make_unique<SentencePieceTokenizer>(*api, model);
  if (absl::Status s = tok->Init(*settings, path.string()); !s.ok()) return s;
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace encoder::tokenizer

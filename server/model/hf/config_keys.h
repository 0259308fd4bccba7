// What the server does with every key of a model directory's JSON files
// (config.json per model_type, and the sentence-transformers module files):
// each key a transformers or sentence-transformers release writes, or its
// modeling code reads from the config, is classified here as
//
//   read        the importer reads it (every spelling listed as its own key),
//   no effect   it cannot change the served arithmetic (the reason is given:
//               training only, generation only, a decoder the server never
//               runs, or decided by the stored tensors and checked there),
//   refused     accepted only at the listed values (absent and null too);
//               any other value stops the load with an error naming it.
//
// A key in none of these is "unread": the load goes on and the server logs
// it by name, since a library the table was not written against may read
// it. tests/conformance/config_keys_test.py walks the pinned transformers
// (both generations) and sentence-transformers and fails on a key this
// table does not classify. Torch-free: encoder-config-keys prints the table
// and classifies a directory without LibTorch.
#ifndef ENCODER_SERVER_MODEL_HF_CONFIG_KEYS_H_
#define ENCODER_SERVER_MODEL_HF_CONFIG_KEYS_H_

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace encoder::model::hf {

enum class KeyUse { kRead, kNoEffect, kRefused };

struct KeyRule {
  KeyUse use = KeyUse::kRead;
  std::string why;
  // kRefused: the values served (absent and null are always accepted).
  std::vector<nlohmann::json> allowed;
  // The value is an object whose keys are classified as "key.child".
  bool nested = false;
};

// One file's rules, by key (nested keys dotted: "rope_parameters.rope_theta").
using KeyTable = std::map<std::string, KeyRule>;

// Every table (hf_config_key_tables.cc): config.json's by model_type (the
// keys every config has, and the family's own), and the sentence-transformers
// files' by what the file is (see ModuleFileKeys).
const std::map<std::string, KeyTable>& ConfigKeyTables();
const std::map<std::string, KeyTable>& ModuleKeyTables();

// config.json's rules for a model_type the server imports; null for any
// other model_type.
const KeyTable* ConfigJsonKeys(const std::string& model_type);

// The sentence-transformers files' rules, by what the file is: a module
// type's last name ("Pooling", "Dense", "LayerNorm", "Normalize",
// "SpladePooling", "Transformer" for sentence_bert_config.json,
// "MLMTransformer") or "config_sentence_transformers.json" /
// "modules.json"; null otherwise.
const KeyTable* ModuleFileKeys(const std::string& what);

// The names sentence-transformers reads a Transformer module's config from,
// the first that exists and is not empty.
inline constexpr const char* kTransformerConfigFiles[] = {
    "sentence_bert_config.json",       "sentence_roberta_config.json",
    "sentence_distilbert_config.json", "sentence_camembert_config.json",
    "sentence_albert_config.json",     "sentence_xlm-roberta_config.json",
    "sentence_xlnet_config.json"};

// What one file's keys are.
struct KeyReport {
  std::vector<std::string> read, no_effect, unread;
  // "key" = value, and what is served instead.
  std::vector<std::string> refused;
};

// Classifies `value` (a JSON object; anything else gives an empty report).
KeyReport ClassifyKeys(const KeyTable& table, const nlohmann::json& value);

// InvalidArgument naming every refused key of `report` ("<file>: ..."),
// else OK.
absl::Status RefusedKeys(const std::string& file, const KeyReport& report);

// Every JSON file of the model directory `dir` that the server reads, each
// classified: file name (relative to `dir`) -> report. config.json by its
// model_type (none for a model_type without a table: the loader refuses
// it by name); each sentence-transformers module's file by the module's
// type (modules of other types are left to the loader, which refuses
// them); config_sentence_transformers.json and modules.json. Absent files
// give no report; a file that is not JSON is InvalidArgument.
absl::StatusOr<std::map<std::string, KeyReport>> ClassifyModelDir(
    const std::string& dir);

// The JSON value of the file at `path`: null when the file does not exist,
// InvalidArgument ("<path>: not valid JSON") when it is not JSON.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

// Every table as JSON: {"config.json": {"<model_type>": {key: rule}},
// "modules": {"<what>": {key: rule}}}; a rule is {"use": "read" |
// "no_effect" | "refused", "why": ..., "allowed": [...], "nested": bool}.
nlohmann::json KeyTablesJson();

}  // namespace encoder::model::hf

#endif  // ENCODER_SERVER_MODEL_HF_CONFIG_KEYS_H_

#include "server/model/hf/config_keys.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"

namespace encoder::model::hf {
namespace {

using nlohmann::json;

const char* UseName(KeyUse use) {
  switch (use) {
    case KeyUse::kRead:
      return "read";
    case KeyUse::kNoEffect:
      return "no_effect";
    case KeyUse::kRefused:
      return "refused";
  }
  return "?";
}

void Classify(const KeyTable& table, const json& value,
              const std::string& prefix, KeyReport* report) {
  for (const auto& [child, v] : value.items()) {
    const std::string key = prefix + child;
    auto it = table.find(key);
    if (it == table.end()) {
      report->unread.push_back(key);
      continue;
    }
    const KeyRule& rule = it->second;
    switch (rule.use) {
      case KeyUse::kRead:
        report->read.push_back(key);
        break;
      case KeyUse::kNoEffect:
        report->no_effect.push_back(key);
        break;
      case KeyUse::kRefused: {
        bool served = v.is_null();
        for (const json& a : rule.allowed) served = served || v == a;
        if (served) {
          report->read.push_back(key);
        } else {
          report->refused.push_back(
              absl::StrCat("\"", key, "\": ", v.dump(), " (", rule.why, ")"));
        }
        break;
      }
    }
    if (rule.nested && v.is_object()) {
      Classify(table, v, key + ".", report);
    }
  }
}

}  // namespace

absl::StatusOr<json> ReadJsonFile(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return json();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  json value = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  }
  return value;
}

namespace {

// The module type's last name ("sentence_transformers.models.Pooling" ->
// "Pooling").
std::string LastName(const std::string& type) {
  const size_t dot = type.find_last_of('.');
  return dot == std::string::npos ? type : type.substr(dot + 1);
}

}  // namespace

absl::StatusOr<std::map<std::string, KeyReport>> ClassifyModelDir(
    const std::string& dir) {
  std::map<std::string, KeyReport> reports;
  // Classifies `file` (relative to dir) when it exists and holds anything.
  auto classify = [&](const std::string& file,
                      const KeyTable& table) -> absl::Status {
    ASSIGN_OR_RETURN(auto value, ReadJsonFile(absl::StrCat(dir, "/", file)));
    if (!value.is_null()) reports[file] = ClassifyKeys(table, value);
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(auto config, ReadJsonFile(dir + "/config.json"));
  if (config.is_object() && config.contains("model_type") &&
      config["model_type"].is_string()) {
    const KeyTable* table =
        ConfigJsonKeys(config["model_type"].get<std::string>());
    if (table != nullptr) reports["config.json"] = ClassifyKeys(*table, config);
  }
  RETURN_IF_ERROR(
      classify("config_sentence_transformers.json",
               *ModuleFileKeys("config_sentence_transformers.json")));
  ASSIGN_OR_RETURN(auto modules, ReadJsonFile(dir + "/modules.json"));
  if (!modules.is_array()) return reports;
  // modules.json: one object per module, classified as their keys together.
  json module_keys = json::object();
  for (const json& m : modules) {
    if (!m.is_object()) continue;
    module_keys.update(m);
    if (!m.contains("type") || !m["type"].is_string()) continue;
    const std::string what = LastName(m["type"].get<std::string>());
    const KeyTable* table = ModuleFileKeys(what);
    if (table == nullptr) continue;
    std::string path = m.contains("path") && m["path"].is_string()
                           ? m["path"].get<std::string>()
                           : "";
    if (!path.empty() && path.back() != '/') path += '/';
    if (what != "Transformer" && what != "MLMTransformer") {
      RETURN_IF_ERROR(classify(path + "config.json", *table));
      continue;
    }
    for (const char* name : kTransformerConfigFiles) {
      ASSIGN_OR_RETURN(auto value,
                       ReadJsonFile(absl::StrCat(dir, "/", path, name)));
      if (value.is_null() || value.empty()) continue;
      reports[path + name] = ClassifyKeys(*table, value);
      break;
    }
  }
  reports["modules.json"] =
      ClassifyKeys(*ModuleFileKeys("modules.json"), module_keys);
  return reports;
}

const KeyTable* ConfigJsonKeys(const std::string& model_type) {
  auto it = ConfigKeyTables().find(model_type);
  return it == ConfigKeyTables().end() ? nullptr : &it->second;
}

const KeyTable* ModuleFileKeys(const std::string& what) {
  auto it =
      ModuleKeyTables().find(what == "MLMTransformer" ? "Transformer" : what);
  return it == ModuleKeyTables().end() ? nullptr : &it->second;
}

KeyReport ClassifyKeys(const KeyTable& table, const json& value) {
  KeyReport report;
  if (value.is_object()) Classify(table, value, "", &report);
  return report;
}

absl::Status RefusedKeys(const std::string& file, const KeyReport& report) {
  if (report.refused.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(file, ": ", absl::StrJoin(report.refused, "; ")));
}

json KeyTablesJson() {
  auto render = [](const KeyTable& table) {
    json out = json::object();
    for (const auto& [key, rule] : table) {
      json r = {{"use", UseName(rule.use)}, {"why", rule.why}};
      if (rule.use == KeyUse::kRefused) r["allowed"] = rule.allowed;
      if (rule.nested) r["nested"] = true;
      out[key] = std::move(r);
    }
    return out;
  };
  json out = {{"config.json", json::object()}, {"modules", json::object()}};
  for (const auto& [type, table] : ConfigKeyTables()) {
    out["config.json"][type] = render(table);
  }
  for (const auto& [what, table] : ModuleKeyTables()) {
    out["modules"][what] = render(table);
  }
  return out;
}

}  // namespace encoder::model::hf

#include "server/model/hf/rope_config.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"

namespace encoder::model::hf {
namespace {

// A number of a rotary parameter object; `fallback` when absent or null
// (none: the key is required).
absl::StatusOr<double> RopeNumber(const nlohmann::json& p, const char* where,
                                  const char* name,
                                  std::optional<double> fallback) {
  if (!ConfigReader(p).Has(name)) {
    if (fallback.has_value()) return *fallback;
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json ", where, " needs \"", name, "\" for its rope_type"));
  }
  if (!p[name].is_number() || !std::isfinite(p[name].get<double>())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json ", where, " \"", name, "\" must be a finite number"));
  }
  return p[name].get<double>();
}

// A required list of positive finite numbers (longrope's factors).
absl::StatusOr<std::vector<double>> RopeList(const nlohmann::json& p,
                                             const char* where,
                                             const char* name) {
  if (!ConfigReader(p).Has(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json ", where, " needs \"", name, "\" for its rope_type"));
  }
  const nlohmann::json& v = p[name];
  std::vector<double> out;
  if (v.is_array()) {
    for (const nlohmann::json& x : v) {
      if (!x.is_number() || !std::isfinite(x.get<double>()) ||
          !(x.get<double>() > 0)) {
        out.clear();
        break;
      }
      out.push_back(x.get<double>());
    }
  }
  if (out.empty() || out.size() != v.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json ", where, " \"", name,
                     "\" must be a list of numbers above 0"));
  }
  return out;
}

// yarn's default attention factor: 0.1 * mscale * ln(factor) + 1 (1 for
// factors up to 1).
double YarnMscale(double factor, double mscale) {
  return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

// Where the config gives its rotary type: the object (null for the
// default type), its key, the type's name; and the base, from rope_theta
// or either object.
struct RopeSource {
  const nlohmann::json* params = nullptr;
  std::string where;
  std::string type = "default";
  double base = 10000.0;
};

absl::StatusOr<RopeSource> FindRope(const nlohmann::json& config,
                                    const ConfigReader& r) {
  RopeSource out;
  out.base = r.NumberOr("rope_theta", 10000.0);
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!r.Has(key)) continue;
    const nlohmann::json& p = config[key];
    if (!p.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json \"", key, "\" must be an object"));
    }
    std::string t = "default";
    for (const char* name : {"rope_type", "type"}) {
      if (p.contains(name) && p[name].is_string()) {
        t = p[name].get<std::string>();
      }
    }
    if (p.contains("rope_theta") && p["rope_theta"].is_number()) {
      out.base = p["rope_theta"].get<double>();
    }
    if (t == "default") continue;
    if (out.params != nullptr && t != out.type) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config.json rope_parameters and rope_scaling give two rotary "
          "types (\"",
          out.type, "\", \"", t, "\"); give one"));
    }
    out.params = &p;
    out.where = key;
    out.type = t;
  }
  return out;
}

absl::StatusOr<RopeScalingType> ScalingType(const RopeSource& src) {
  static const std::pair<const char*, RopeScalingType> kTypes[] = {
      {"linear", RopeScalingType::kLinear},
      {"dynamic", RopeScalingType::kDynamic},
      {"yarn", RopeScalingType::kYarn},
      {"longrope", RopeScalingType::kLongrope},
      {"llama3", RopeScalingType::kLlama3},
      {"proportional", RopeScalingType::kProportional},
  };
  for (const auto& [name, type] : kTypes) {
    if (src.type == name) return type;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "config.json ", src.where, " type \"", src.type,
      "\" is not supported: served are \"default\", \"linear\", \"dynamic\", "
      "\"yarn\", \"longrope\", \"llama3\" and \"proportional\""));
}

// The scaled types rotate whole heads only.
absl::Status CheckWholeHeads(const nlohmann::json& config,
                             const RopeSource& src) {
  for (const nlohmann::json* holder : {&config, src.params}) {
    if (ConfigReader(*holder).Has("partial_rotary_factor")) {
      const nlohmann::json& v = (*holder)["partial_rotary_factor"];
      if (!v.is_number() || v.get<double>() != 1.0) {
        return absl::InvalidArgumentError(
            absl::StrCat("config.json partial_rotary_factor ", v.dump(),
                         " with rope_type \"", src.type,
                         "\": only whole heads are rotated (1)"));
      }
    }
  }
  return absl::OkStatus();
}

// The unscaled context: dynamic's is max_position_embeddings; the others
// take a top-level original_max_position_embeddings (transformers 5), else
// the type's, else max_position_embeddings.
absl::StatusOr<int64_t> OriginalContext(const ConfigReader& r,
                                        const RopeSource& src,
                                        RopeScalingType type,
                                        int64_t max_positions) {
  std::optional<double> original;
  if (type == RopeScalingType::kDynamic) {
    original = static_cast<double>(max_positions);
  } else if (r.Has("original_max_position_embeddings")) {
    original = r.NumberOr("original_max_position_embeddings", 0);
  }
  if (!original.has_value()) {
    ASSIGN_OR_RETURN(double o, RopeNumber(*src.params, src.where.c_str(),
                                          "original_max_position_embeddings",
                                          static_cast<double>(max_positions)));
    original = o;
  }
  if (!(*original >= 1) || *original > 1e9) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json original_max_position_embeddings ", *original,
                     " is out of range"));
  }
  return static_cast<int64_t>(*original);
}

absl::Status ReadYarn(const nlohmann::json& p, const char* where,
                      RopeScaling* s) {
  // transformers reads `get("beta_fast") or 32`: 0 is the default too.
  ASSIGN_OR_RETURN(s->beta_fast, RopeNumber(p, where, "beta_fast", 32.0));
  if (s->beta_fast == 0) s->beta_fast = 32.0;
  ASSIGN_OR_RETURN(s->beta_slow, RopeNumber(p, where, "beta_slow", 1.0));
  if (s->beta_slow == 0) s->beta_slow = 1.0;
  if (!(s->beta_fast > 0) || !(s->beta_slow > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json ", where, " beta_fast and beta_slow must be above 0"));
  }
  s->truncate = true;
  if (ConfigReader(p).Has("truncate")) {
    if (!p["truncate"].is_boolean()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config.json ", where, " \"truncate\" must be true or false"));
    }
    s->truncate = p["truncate"].get<bool>();
  }
  if (ConfigReader(p).Has("attention_factor")) {
    ASSIGN_OR_RETURN(s->attention_factor,
                     RopeNumber(p, where, "attention_factor", {}));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(double mscale, RopeNumber(p, where, "mscale", 0.0));
  ASSIGN_OR_RETURN(double mscale_all_dim,
                   RopeNumber(p, where, "mscale_all_dim", 0.0));
  s->attention_factor = mscale != 0 && mscale_all_dim != 0
                            ? YarnMscale(s->factor, mscale) /
                                  YarnMscale(s->factor, mscale_all_dim)
                            : YarnMscale(s->factor, 1.0);
  return absl::OkStatus();
}

absl::Status ReadLlama3(const nlohmann::json& p, const char* where,
                        RopeScaling* s) {
  ASSIGN_OR_RETURN(s->low_freq_factor,
                   RopeNumber(p, where, "low_freq_factor", {}));
  ASSIGN_OR_RETURN(s->high_freq_factor,
                   RopeNumber(p, where, "high_freq_factor", {}));
  if (!(s->low_freq_factor > 0) ||
      !(s->high_freq_factor > s->low_freq_factor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json ", where,
                     " needs 0 < low_freq_factor < high_freq_factor"));
  }
  return absl::OkStatus();
}

// longrope: the two factor lists, and the attention factor given or
// sqrt(1 + ln(factor) / ln(original)) (1 for factors up to 1).
absl::Status ReadLongrope(const nlohmann::json& p, const char* where,
                          RopeScaling* s) {
  ASSIGN_OR_RETURN(s->short_factor, RopeList(p, where, "short_factor"));
  ASSIGN_OR_RETURN(s->long_factor, RopeList(p, where, "long_factor"));
  if (ConfigReader(p).Has("attention_factor")) {
    ASSIGN_OR_RETURN(s->attention_factor,
                     RopeNumber(p, where, "attention_factor", {}));
    return absl::OkStatus();
  }
  s->attention_factor =
      s->factor <= 1 ? 1.0
                     : std::sqrt(1 + std::log(s->factor) /
                                         std::log(static_cast<double>(
                                             s->original_max_positions)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseRopeOverride(const std::string& scaling) {
  nlohmann::json p = nlohmann::json::parse(scaling, nullptr, false);
  if (!p.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rope_scaling override ", scaling, " is not a JSON object"));
  }
  if (p.contains("type") && !p.contains("rope_type")) {
    p["rope_type"] = p["type"];
    p.erase("type");
  }
  if (!p.contains("rope_type") || !p["rope_type"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rope_scaling override ", scaling, " needs a \"rope_type\""));
  }
  return p;
}

absl::Status OverrideRope(const std::string& scaling, nlohmann::json* config) {
  ASSIGN_OR_RETURN(nlohmann::json p, ParseRopeOverride(scaling));
  nlohmann::json& c = *config;
  if (!p.contains("rope_theta")) {
    const ConfigReader r(c);
    ASSIGN_OR_RETURN(const RopeSource src, FindRope(c, r));
    p["rope_theta"] = src.base;
  }
  if (c.contains("original_max_position_embeddings")) {
    if (!p.contains("original_max_position_embeddings")) {
      p["original_max_position_embeddings"] =
          c["original_max_position_embeddings"];
    }
    c.erase("original_max_position_embeddings");
  }
  c.erase("rope_scaling");
  c["rope_parameters"] = p;
  return absl::OkStatus();
}

absl::Status ReadRope(const nlohmann::json& config, const ConfigReader& r,
                      int64_t max_positions, PositionalConfig* out) {
  ASSIGN_OR_RETURN(const RopeSource src, FindRope(config, r));
  out->base = src.base;
  if (src.params == nullptr) return absl::OkStatus();
  const nlohmann::json& p = *src.params;
  const char* where = src.where.c_str();
  RopeScaling& s = out->rope_scaling;
  ASSIGN_OR_RETURN(s.type, ScalingType(src));
  RETURN_IF_ERROR(CheckWholeHeads(config, src));
  ASSIGN_OR_RETURN(s.original_max_positions,
                   OriginalContext(r, src, s.type, max_positions));
  // transformers: yarn and longrope take max_position_embeddings /
  // original when factor is unset; proportional 1; the others need one.
  std::optional<double> factor_fallback;
  if (s.type == RopeScalingType::kYarn ||
      s.type == RopeScalingType::kLongrope) {
    factor_fallback = static_cast<double>(max_positions) /
                      static_cast<double>(s.original_max_positions);
  } else if (s.type == RopeScalingType::kProportional) {
    factor_fallback = 1.0;
  }
  ASSIGN_OR_RETURN(s.factor, RopeNumber(p, where, "factor", factor_fallback));
  if (!(s.factor > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json ", where, " factor ", s.factor, " must be above 0"));
  }
  switch (s.type) {
    case RopeScalingType::kYarn:
      return ReadYarn(p, where, &s);
    case RopeScalingType::kLlama3:
      return ReadLlama3(p, where, &s);
    case RopeScalingType::kLongrope:
      return ReadLongrope(p, where, &s);
    default:
      return absl::OkStatus();
  }
}

absl::Status ReadLayerTypeRope(const nlohmann::json& config, const char* key,
                               const nlohmann::json& params, double base,
                               int64_t max_positions, PositionalConfig* out) {
  nlohmann::json sub = {{"rope_theta", base}};
  for (const char* copied :
       {"partial_rotary_factor", "original_max_position_embeddings"}) {
    if (config.contains(copied)) sub[copied] = config[copied];
  }
  if (!params.is_null()) {
    if (!params.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config.json rope_parameters.", key, " must be an object"));
    }
    sub["rope_parameters"] = params;
  }
  return ReadRope(sub, ConfigReader(sub), max_positions, out);
}

}  // namespace encoder::model::hf

// The repository the serve flags name (serve_flags.h, BuildRepository):
// the models from --repository, --model-dir or the built-in default, the
// per-checkpoint overrides (--rope-scaling, --rerank-template), the prompt
// and whitespace options, and the names (--served-model-name,
// --model-alias, --strict-model-names).
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/app/serve_flags.h"
#include "server/common/status_macros.h"

namespace encoder {

namespace {

// The checkpoint a per-model flag (`option` NAME=VALUE, e.g. `example`)
// names, and its value.
absl::StatusOr<std::pair<model::ModelSpec*, std::string>> CheckpointFlag(
    const char* option, const char* example, const std::string& flag,
    model::Repository* repo) {
  const size_t eq = flag.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, " \"", flag, "\": give ", example));
  }
  const std::string name = flag.substr(0, eq);
  model::ModelSpec* target = nullptr;
  for (model::ModelSpec& spec : repo->models) {
    if (spec.name == name) target = &spec;
  }
  if (target == nullptr || target->model_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        option, " ", name, ": no checkpoint is served as \"", name,
        "\" (--model-id, --model-dir or a repository entry with a path)"));
  }
  return std::pair{target, flag.substr(eq + 1)};
}

// --rope-scaling NAME=JSON onto the checkpoint served as NAME.
absl::Status ApplyRopeScalings(const std::vector<std::string>& flags,
                               model::Repository* repo) {
  for (const std::string& flag : flags) {
    ASSIGN_OR_RETURN(
        auto target,
        CheckpointFlag("--rope-scaling",
                       "NAME=JSON, e.g. "
                       "long={\"rope_type\":\"yarn\",\"factor\":4}",
                       flag, repo));
    target.first->rope_scaling = target.second;
  }
  return absl::OkStatus();
}

// --rerank-template NAME=TEMPLATE onto the checkpoint served as NAME.
absl::Status ApplyRerankTemplates(const std::vector<std::string>& flags,
                                  model::Repository* repo) {
  for (const std::string& flag : flags) {
    ASSIGN_OR_RETURN(
        auto target,
        CheckpointFlag("--rerank-template",
                       "NAME=TEMPLATE, e.g. reranker=qwen3-reranker", flag,
                       repo));
    auto parsed = model::ParseRerankTemplate(target.second);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rerank-template ", target.first->name, ": ",
                       parsed.status().message()));
    }
    target.first->rerank_template = std::move(*parsed);
  }
  return absl::OkStatus();
}

absl::StatusOr<model::Repository> BuildModels(const ServeFlags& f) {
  model::Repository repo;
  if (!f.models.empty()) {
    ASSIGN_OR_RETURN(auto read, model::ReadRepository(f.models));
    repo = std::move(read);
  } else if (f.model_dirs.empty()) {
    repo = model::BuiltinRepository();
    RETURN_IF_ERROR(ApplyRopeScalings(f.rope_scalings, &repo));
    RETURN_IF_ERROR(ApplyRerankTemplates(f.rerank_templates, &repo));
    return repo;
  }
  std::optional<model::Pooling> pooling;
  if (!f.model_dir_pooling.empty()) {
    ASSIGN_OR_RETURN(auto p, model::ParsePoolingName(f.model_dir_pooling));
    pooling = p;
  }
  for (const std::string& flag : f.model_dirs) {
    ASSIGN_OR_RETURN(auto spec, model::ModelDirSpec(flag));
    spec.pooling = pooling;
    for (const auto& existing : repo.models) {
      if (existing.name == spec.name) {
        return absl::InvalidArgumentError(
            absl::StrCat("two models are named \"", spec.name,
                         "\"; name them with --model-dir NAME=DIR"));
      }
    }
    repo.models.push_back(std::move(spec));
  }
  RETURN_IF_ERROR(ApplyRopeScalings(f.rope_scalings, &repo));
  RETURN_IF_ERROR(ApplyRerankTemplates(f.rerank_templates, &repo));
  if (f.builtin_models) {
    for (model::ModelSpec& spec : model::BuiltinRepository().models) {
      for (const auto& existing : repo.models) {
        if (existing.name == spec.name) {
          return absl::InvalidArgumentError(absl::StrCat(
              "--builtin-models: a listed model is named \"", spec.name,
              "\" as a built-in one; rename it (NAME=...)"));
        }
      }
      repo.models.push_back(std::move(spec));
    }
  }
  if (repo.default_model.empty()) repo.default_model = repo.models[0].name;
  return repo;
}

// --served-model-name, --model-alias and --strict-model-names.
absl::Status ApplyNames(const ServeFlags& f, model::Repository* repo) {
  auto served = [&](const std::string& name) {
    for (const auto& m : repo->models) {
      if (m.name == name) return true;
    }
    return false;
  };
  if (!f.served_model_name.empty()) {
    model::ModelSpec& first = repo->models.front();
    if (served(f.served_model_name) && first.name != f.served_model_name) {
      return absl::InvalidArgumentError(
          absl::StrCat("--served-model-name \"", f.served_model_name,
                       "\": another model has that name"));
    }
    if (first.name != f.served_model_name) {
      repo->aliases[first.name] = f.served_model_name;
      if (repo->default_model == first.name) {
        repo->default_model = f.served_model_name;
      }
      first.name = f.served_model_name;
    }
  }
  for (const std::string& flag : f.model_aliases) {
    const size_t eq = flag.find('=');
    const std::string alias = flag.substr(0, eq);
    const std::string name =
        eq == std::string::npos ? std::string() : flag.substr(eq + 1);
    if (alias.empty() || name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model-alias \"", flag, "\": give ALIAS=MODEL"));
    }
    if (!served(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--model-alias \"", flag, "\": no model is named \"", name, "\""));
    }
    if (served(alias)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--model-alias \"", flag, "\": a model is named \"", alias, "\""));
    }
    repo->aliases[alias] = name;
  }
  repo->strict_names = f.strict_model_names;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<model::Repository> BuildRepository(const ServeFlags& f) {
  ASSIGN_OR_RETURN(model::Repository repo, BuildModels(f));
  bool any_checkpoint = false;
  for (model::ModelSpec& spec : repo.models) {
    if (!spec.strip_text.has_value()) spec.strip_text = f.strip_text;
    if (spec.model_dir.empty()) continue;
    any_checkpoint = true;
    spec.forced_default_prompt_name = f.tei.default_prompt_name;
    spec.forced_default_prompt = f.tei.default_prompt;
  }
  if (!any_checkpoint && (f.tei.default_prompt_name.has_value() ||
                          f.tei.default_prompt.has_value())) {
    return absl::InvalidArgumentError(absl::StrCat(
        f.tei.default_prompt_name.has_value() ? "--default-prompt-name"
                                              : "--default-prompt",
        " applies to the models served from a checkpoint "
        "(--model-id, --model-dir); none is listed"));
  }
  RETURN_IF_ERROR(ApplyNames(f, &repo));
  return repo;
}

}  // namespace encoder

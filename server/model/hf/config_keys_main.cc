// encoder-config-keys: what the server does with each key of a model
// directory's JSON files (server/model/hf/config_keys.h).
//
//   encoder-config-keys            every table, as JSON
//   encoder-config-keys check DIR  DIR's files classified, as JSON; exit 1
//                                  when a key is refused (the server would
//                                  not load DIR), 2 on a usage or file error
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "server/model/hf/config_keys.h"

namespace {

using encoder::model::hf::KeyReport;
using nlohmann::json;

int Check(const std::string& dir) {
  auto reports = encoder::model::hf::ClassifyModelDir(dir);
  if (!reports.ok()) {
    std::fprintf(stderr, "%s\n", reports.status().ToString().c_str());
    return 2;
  }
  json out = json::object();
  bool refused = false;
  for (const auto& [file, r] : *reports) {
    out[file] = {{"read", r.read},
                 {"no_effect", r.no_effect},
                 {"unread", r.unread},
                 {"refused", r.refused}};
    refused = refused || !r.refused.empty();
  }
  std::printf("%s\n", out.dump(1).c_str());
  return refused ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 1) {
    std::printf("%s\n", encoder::model::hf::KeyTablesJson().dump(1).c_str());
    return 0;
  }
  if (argc == 3 && std::string(argv[1]) == "check") return Check(argv[2]);
  std::fprintf(stderr,
               "usage: encoder-config-keys [check MODEL_DIR]\n"
               "  with no argument: every key table as JSON\n"
               "  check: MODEL_DIR's JSON files classified; exit 1 when a "
               "key is refused\n");
  return 2;
}

// The Hub client's pure functions: environment precedence, names, etags,
// URLs and the choice of files. Expected values are huggingface_hub's
// documented behaviour (constants.py, validate_repo_id's docstring,
// _normalize_etag, urllib.parse.quote), not this library's output.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "server/hub/file_selection.h"
#include "server/hub/hub_env.h"
#include "server/hub/hub_http.h"
#include "server/hub/hub_layout.h"

namespace encoder::hub {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

TEST(HubEnv, CachePrecedence) {
  const auto home = Env({{"HOME", "/home/u"}});
  EXPECT_EQ(HubCacheDir("", home), "/home/u/.cache/huggingface/hub");
  EXPECT_EQ(
      HubCacheDir("", Env({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/xdg"}})),
      "/xdg/huggingface/hub");
  EXPECT_EQ(HubCacheDir("", Env({{"HOME", "/home/u"},
                                 {"XDG_CACHE_HOME", "/xdg"},
                                 {"HF_HOME", "/hf"}})),
            "/hf/hub");
  EXPECT_EQ(HubCacheDir("", Env({{"HF_HOME", "/hf"},
                                 {"HUGGINGFACE_HUB_CACHE", "/legacy"}})),
            "/legacy");
  EXPECT_EQ(HubCacheDir("", Env({{"HF_HOME", "/hf"},
                                 {"HUGGINGFACE_HUB_CACHE", "/legacy"},
                                 {"HF_HUB_CACHE", "/hub"}})),
            "/hub");
  EXPECT_EQ(HubCacheDir("/explicit", Env({{"HF_HUB_CACHE", "/hub"}})),
            "/explicit");
}

TEST(HubEnv, ExpandsUserAndVariables) {
  const auto env = Env({{"HOME", "/home/u"}, {"BASE", "/data"}});
  EXPECT_EQ(
      HubCacheDir("", Env({{"HOME", "/home/u"}, {"HF_HUB_CACHE", "~/models"}})),
      "/home/u/models");
  EXPECT_EQ(ExpandUserAndVars("$BASE/hf/${BASE}", env), "/data/hf//data");
  // Unknown variables stay as written (os.path.expandvars).
  EXPECT_EQ(ExpandUserAndVars("$NOPE/x/${NOPE}", env), "$NOPE/x/${NOPE}");
  EXPECT_EQ(ExpandUserAndVars("a$", env), "a$");
  EXPECT_EQ(HfHome(Env({{"HF_HOME", "$BASE/hf"}, {"BASE", "/data"}})),
            "/data/hf");
}

TEST(HubEnv, EndpointOfflineAndTokenPath) {
  EXPECT_EQ(Endpoint(Env({})), "https://huggingface.co");
  EXPECT_EQ(Endpoint(Env({{"HF_ENDPOINT", "http://mirror:8080//"}})),
            "http://mirror:8080");
  for (const char* on : {"1", "ON", "yes", "True"}) {
    EXPECT_TRUE(OfflineMode(Env({{"HF_HUB_OFFLINE", on}}))) << on;
  }
  for (const char* off : {"0", "off", "no", "2", "y"}) {
    EXPECT_FALSE(OfflineMode(Env({{"HF_HUB_OFFLINE", off}}))) << off;
  }
  EXPECT_TRUE(OfflineMode(Env({{"TRANSFORMERS_OFFLINE", "1"}})));
  // HF_HUB_OFFLINE, when set, wins over TRANSFORMERS_OFFLINE.
  EXPECT_FALSE(OfflineMode(
      Env({{"HF_HUB_OFFLINE", "0"}, {"TRANSFORMERS_OFFLINE", "1"}})));
  EXPECT_EQ(TokenPath(Env({{"HF_HOME", "/hf"}})), "/hf/token");
  EXPECT_EQ(TokenPath(Env({{"HF_HOME", "/hf"}, {"HF_TOKEN_PATH", "/t"}})),
            "/t");
}

TEST(HubEnv, TokenOrder) {
  const auto env = Env({{"HF_HOME", "/nonexistent-hf-home"},
                        {"HF_TOKEN", " hf_env\n"},
                        {"HUGGING_FACE_HUB_TOKEN", "hf_legacy"}});
  EXPECT_EQ(*FindToken("hf_given", "", env), "hf_given");
  EXPECT_EQ(*FindToken("", "", env), "hf_env");
  EXPECT_EQ(*FindToken("", "",
                       Env({{"HF_HOME", "/nonexistent-hf-home"},
                            {"HUGGING_FACE_HUB_TOKEN", "hf_legacy"}})),
            "hf_legacy");
  EXPECT_EQ(*FindToken("", "", Env({{"HF_HOME", "/nonexistent-hf-home"}})), "");
  auto missing = FindToken("", "/nonexistent-token-file", env);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HubEnv, RepoIds) {
  // validate_repo_id's docstring.
  for (const char* ok : {"foo", "foo/bar", "123", "Foo-BAR_foo.bar123"}) {
    EXPECT_TRUE(ValidateRepoId(ok).ok()) << ok;
  }
  for (const char* bad :
       {"datasets/foo/bar", ".repo_id", "foo--bar", "foo.git",
        "other..repo..id", "", "a b", "org/", "/name", "org/-name"}) {
    EXPECT_EQ(ValidateRepoId(bad).code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  auto ref = ParseRepoRef("acme/model");
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->repo_id, "acme/model");
  EXPECT_EQ(ref->revision, "main");
  ref = ParseRepoRef("acme/model@refs/pr/1");
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->revision, "refs/pr/1");
  for (const char* bad :
       {"acme/model@", "acme/model@../x", "acme/model@/x", "acme/model@a//b"}) {
    EXPECT_EQ(ParseRepoRef(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(RepoFolderName("acme/model"), "models--acme--model");
  EXPECT_EQ(RepoFolderName("gpt2"), "models--gpt2");
  EXPECT_TRUE(IsCommitHash("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(IsCommitHash("0123456789ABCDEF0123456789abcdef01234567"));
  EXPECT_FALSE(IsCommitHash("main"));
}

TEST(HubEnv, EtagsAndQuoting) {
  // _normalize_etag: lstrip("W/") then strip('"').
  EXPECT_EQ(NormalizeEtag("W/\"abc\""), "abc");
  EXPECT_EQ(NormalizeEtag("\"abc\""), "abc");
  EXPECT_EQ(NormalizeEtag("abc"), "abc");
  // urllib.parse.quote(x, safe="") and quote(x) (safe="/").
  EXPECT_EQ(UrlQuote("refs/pr/1", ""), "refs%2Fpr%2F1");
  EXPECT_EQ(UrlQuote("a dir/é.json", "/"), "a%20dir/%C3%A9.json");
  EXPECT_EQ(UrlQuote("v1.0_rc-2~", ""), "v1.0_rc-2~");
}

TEST(HubLayout, PointerTargetsAreRelative) {
  // os.path.relpath(blob, dirname(pointer)).
  EXPECT_EQ(internal::PointerTarget("config.json", "e1"), "../../blobs/e1");
  EXPECT_EQ(internal::PointerTarget("1_Pooling/config.json", "e2"),
            "../../../blobs/e2");
}

TEST(HubHttp, Origins) {
  EXPECT_EQ(UrlOrigin("https://HuggingFace.co/a/b"),
            UrlOrigin("https://huggingface.co:443/c"));
  EXPECT_NE(UrlOrigin("http://127.0.0.1:8000/a"),
            UrlOrigin("http://127.0.0.1:8001/a"));
  EXPECT_EQ(ResolveUrl("http://h:1/a/resolve/x/f", "/b/resolve/x/f"),
            "http://h:1/b/resolve/x/f");
  EXPECT_EQ(ResolveUrl("http://h:1/a", "https://cdn/o?sig=1"),
            "https://cdn/o?sig=1");
}

TEST(FileSelection, ModelFilesOnly) {
  const std::vector<std::string> repo = {"config.json",
                                         "tokenizer.json",
                                         "vocab.txt",
                                         "spiece.model",
                                         "modules.json",
                                         "sentence_bert_config.json",
                                         "1_Pooling/config.json",
                                         "2_Dense/config.json",
                                         "2_Dense/model.safetensors",
                                         "2_Dense/pytorch_model.bin",
                                         "model.safetensors",
                                         "pytorch_model.bin",
                                         "tf_model.h5",
                                         "flax_model.msgpack",
                                         "rust_model.ot",
                                         "onnx/model.onnx",
                                         "onnx/config.json",
                                         "openvino/openvino_model.xml",
                                         "README.md",
                                         "3_Other/config.json"};
  auto files = SelectModelFiles(repo, {"1_Pooling", "2_Dense"}, "acme/m");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files,
            (std::vector<std::string>{
                "1_Pooling/config.json", "2_Dense/config.json", "config.json",
                "modules.json", "sentence_bert_config.json", "spiece.model",
                "tokenizer.json", "vocab.txt", "2_Dense/model.safetensors",
                "model.safetensors"}));
}

// BAAI/bge-m3's layout: the heads' pickles beside the safetensors come
// along; the full model's pytorch_model.bin and the ONNX export do not.
TEST(FileSelection, TakesBgeM3Heads) {
  auto files = SelectModelFiles(
      {"config.json", "colbert_linear.pt", "sparse_linear.pt",
       "model.safetensors", "pytorch_model.bin", "onnx/model.onnx",
       "tokenizer.json", "1_Pooling/config.json", "modules.json"},
      {"1_Pooling"}, "BAAI/bge-m3");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files, (std::vector<std::string>{
                        "1_Pooling/config.json", "colbert_linear.pt",
                        "config.json", "modules.json", "sparse_linear.pt",
                        "tokenizer.json", "model.safetensors"}));
}

TEST(FileSelection, RefusesWithoutSafetensors) {
  auto bin_only = SelectModelFiles(
      {"config.json", "vocab.txt", "pytorch_model.bin"}, {}, "acme/old");
  EXPECT_EQ(bin_only.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(bin_only.status().message().find(
                "python scripts/convert_to_safetensors.py DIR"),
            std::string::npos);
  // The root model's pickles are not made up for by a module's weights.
  auto root_pickles = SelectModelFiles(
      {"config.json", "pytorch_model.bin", "2_Dense/model.safetensors"},
      {"2_Dense"}, "acme/old");
  EXPECT_EQ(root_pickles.status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto onnx_only =
      SelectModelFiles({"config.json", "onnx/model.onnx"}, {}, "acme/onnx");
  EXPECT_EQ(onnx_only.status().code(), absl::StatusCode::kFailedPrecondition);
  auto no_config = SelectModelFiles({"model.safetensors"}, {}, "acme/x");
  EXPECT_EQ(no_config.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(FileSelection, ModulePaths) {
  auto paths = ModulePaths(
      R"([{"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
          {"idx": 1, "path": "1_Pooling/", "type": "sentence_transformers.models.Pooling"},
          {"idx": 2, "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])");
  ASSERT_TRUE(paths.ok());
  EXPECT_EQ(*paths, (std::vector<std::string>{"1_Pooling", "2_Normalize"}));
  EXPECT_EQ(ModulePaths("{}").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ModulePaths("not json").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace encoder::hub

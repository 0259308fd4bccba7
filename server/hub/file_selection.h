// Which files of a Hub repository the server needs: the model's config,
// its tokenizer, the sentence-transformers module files and the safetensors
// weights. Everything else (ONNX and OpenVINO exports, PyTorch pickles,
// TensorFlow, Flax and Rust weights, READMEs, images) stays on the Hub.
#ifndef ENCODER_SERVER_HUB_FILE_SELECTION_H_
#define ENCODER_SERVER_HUB_FILE_SELECTION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace encoder::hub {

// The module directories a sentence-transformers modules.json lists (each
// module's "path", trailing slashes removed; the root module's "" is left
// out). INVALID_ARGUMENT when the text is not a JSON list of objects.
absl::StatusOr<std::vector<std::string>> ModulePaths(
    absl::string_view modules_json);

// True for a root-level file the tokenizer or config needs (before weights
// and modules are considered): config.json, tokenizer.json,
// tokenizer_config.json, special_tokens_map.json, added_tokens.json,
// vocab.txt, vocab.json, merges.txt, a SentencePiece *.model, modules.json,
// config_sentence_transformers.json, sentence_*_config.json,
// model.safetensors.index.json, *.safetensors, and BGE-M3's
// colbert_linear.pt and sparse_linear.pt.
bool IsRootModelFile(absl::string_view name);

// The files of `repo_files` (a repository's paths, '/'-separated) to
// download: the root files IsRootModelFile accepts, and in each of
// `module_paths` its own (not nested) *.json, *.safetensors and tokenizer
// files. Small files first, then the weights, each group in sorted order.
//
// FAILED_PRECONDITION, naming `repo_label`, when there is no config.json or
// no *.safetensors weights: with PyTorch pickles (pytorch_model*.bin) the
// message names scripts/convert_to_safetensors.py, which converts them.
absl::StatusOr<std::vector<std::string>> SelectModelFiles(
    const std::vector<std::string>& repo_files,
    const std::vector<std::string>& module_paths, absl::string_view repo_label);

}  // namespace encoder::hub

#endif  // ENCODER_SERVER_HUB_FILE_SELECTION_H_

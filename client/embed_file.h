// Inputs read from a file for `embed --input`, and the writers of the
// per-input results: JSON Lines, one compact JSON document, or a NumPy .npy
// array.
#ifndef ENCODER_CLIENT_EMBED_FILE_H_
#define ENCODER_CLIENT_EMBED_FILE_H_

#include <cstdint>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "encoder/v1/encoder.pb.h"

namespace encoder_client {

// JSON whose floating-point numbers are float: embeddings print as the
// shortest text that reads back as the same float32.
using FloatJson =
    nlohmann::basic_json<nlohmann::ordered_map, std::vector, std::string, bool,
                         std::int64_t, std::uint64_t, float>;

enum class InputFormat {
  kText,   // one UTF-8 text a line (other bytes go as text_bytes, which
           // the server refuses naming the offset)
  kJsonl,  // one JSON object a line: {"text": ...} or {"ids": [...]},
           // optionally with "id" (string or integer, echoed back)
};

// kJsonl for paths ending in .jsonl or .ndjson, kText otherwise (also "-").
InputFormat FormatForPath(const std::string& path);

// One input and where it came from.
struct FileInput {
  int64_t line = 0;                     // 1-based; 0: from the command line
  nlohmann::ordered_json id = nullptr;  // the jsonl "id", null when absent
  encoder::v1::Input input;
};

// Parses one non-blank line. False, with `*error` saying why (without the
// line number), when it is not valid in `format`: invalid UTF-8 JSON, not an
// object, neither or both of "text" and "ids", ids that are not integers,
// an "id" that is neither a string nor an integer.
bool ParseInputLine(const std::string& line, InputFormat format,
                    FileInput* input, std::string* error);

// Reads every line of `in`. Blank lines (only spaces, tabs, CR) are
// skipped; a trailing CR is stripped. Stops at the first malformed line:
// false with `*error` = "line N: why".
bool ReadInputs(std::istream& in, InputFormat format,
                std::vector<FileInput>* inputs, std::string* error);

// What became of one input.
struct InputOutcome {
  bool ok = false;
  int32_t num_tokens = 0;
  bool truncated = false;
  std::vector<float> embedding;  // the pooled vector [D]
  int code = 0;                  // grpc::StatusCode when !ok
  std::string message;           // error message when !ok
};

// The JSON record of input `index`: {"index", "line" (file inputs), "id"
// (when given), "num_tokens", "truncated", "embedding"} or, when it failed,
// {"index", "line", "id", "error": {"code": NAME, "message"}}.
FloatJson RecordJson(size_t index, const FileInput& input,
                     const InputOutcome& outcome);

// The NumPy format 1.0 header (magic, version, length, dict padded with
// spaces to a multiple of 64 bytes, newline) of a C-order little-endian
// float32 array of shape [rows, cols].
std::string NpyHeader(int64_t rows, int64_t cols);

// Writes `rows` x `cols` float32 values (row-major) as a .npy file. False,
// with `*error`, when the file cannot be written.
bool WriteNpy(const std::string& path, int64_t rows, int64_t cols,
              const std::vector<float>& values, std::string* error);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_EMBED_FILE_H_

#include "client/embed_file.h"

#include <cstring>
#include <fstream>

#include "client/errors.h"

namespace encoder_client {
namespace {

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsBlank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

// Whether `text` is well-formed UTF-8 (no overlongs, surrogates or code
// points past U+10FFFF).
bool IsUtf8(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    int length = 0;
    uint32_t min = 0;
    uint32_t code = 0;
    if (byte < 0x80) {
      ++i;
      continue;
    } else if ((byte & 0xe0) == 0xc0) {
      length = 2, min = 0x80, code = byte & 0x1f;
    } else if ((byte & 0xf0) == 0xe0) {
      length = 3, min = 0x800, code = byte & 0x0f;
    } else if ((byte & 0xf8) == 0xf0) {
      length = 4, min = 0x10000, code = byte & 0x07;
    } else {
      return false;
    }
    if (i + length > text.size()) return false;
    for (int k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
      return false;
    }
    i += length;
  }
  return true;
}

bool ParseJsonLine(const std::string& line, FileInput* input,
                   std::string* error) {
  nlohmann::ordered_json value;
  try {
    value = nlohmann::ordered_json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    *error = std::string("invalid JSON: ") + e.what();
    return false;
  }
  if (!value.is_object()) {
    *error = "expected a JSON object with \"text\" or \"ids\"";
    return false;
  }
  const auto text = value.find("text");
  const auto ids = value.find("ids");
  if ((text == value.end()) == (ids == value.end())) {
    *error = "expected exactly one of \"text\" and \"ids\"";
    return false;
  }
  if (text != value.end()) {
    if (!text->is_string()) {
      *error = "\"text\" must be a string";
      return false;
    }
    input->input.set_text(text->get<std::string>());
  } else {
    if (!ids->is_array()) {
      *error = "\"ids\" must be an array of integers";
      return false;
    }
    auto* out = input->input.mutable_token_ids();
    for (const auto& id : *ids) {
      if (!id.is_number_integer() ||
          (id.is_number_unsigned() &&
           id.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
        *error = "\"ids\" must be an array of integers (got " + id.dump() + ")";
        return false;
      }
      out->add_ids(id.get<int64_t>());
    }
  }
  const auto id = value.find("id");
  if (id != value.end()) {
    if (!id->is_string() && !id->is_number_integer()) {
      *error = "\"id\" must be a string or an integer";
      return false;
    }
    input->id = *id;
  }
  return true;
}

}  // namespace

InputFormat FormatForPath(const std::string& path) {
  return EndsWith(path, ".jsonl") || EndsWith(path, ".ndjson")
             ? InputFormat::kJsonl
             : InputFormat::kText;
}

bool ParseInputLine(const std::string& line, InputFormat format,
                    FileInput* input, std::string* error) {
  if (format == InputFormat::kJsonl) return ParseJsonLine(line, input, error);
  // Not UTF-8: sent as text_bytes, which the server refuses naming the
  // byte offset (protobuf would complain about such a string field).
  if (IsUtf8(line)) {
    input->input.set_text(line);
  } else {
    input->input.set_text_bytes(line);
  }
  return true;
}

bool ReadInputs(std::istream& in, InputFormat format,
                std::vector<FileInput>* inputs, std::string* error) {
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (IsBlank(line)) continue;
    FileInput input;
    input.line = number;
    std::string why;
    if (!ParseInputLine(line, format, &input, &why)) {
      *error = "line " + std::to_string(number) + ": " + why;
      return false;
    }
    inputs->push_back(std::move(input));
  }
  if (in.bad()) {
    *error = "read failed after line " + std::to_string(number);
    return false;
  }
  return true;
}

FloatJson RecordJson(size_t index, const FileInput& input,
                     const InputOutcome& outcome) {
  FloatJson record = FloatJson::object();
  record["index"] = index;
  if (input.line > 0) record["line"] = input.line;
  if (!input.id.is_null()) record["id"] = FloatJson::parse(input.id.dump());
  if (!outcome.ok) {
    record["error"] = {{"code", StatusCodeName(outcome.code)},
                       {"message", outcome.message}};
    return record;
  }
  record["num_tokens"] = outcome.num_tokens;
  record["truncated"] = outcome.truncated;
  record["embedding"] = outcome.embedding;
  return record;
}

std::string NpyHeader(int64_t rows, int64_t cols) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                     std::to_string(rows) + ", " + std::to_string(cols) +
                     "), }";
  // magic (6) + version (2) + header length (2) + dict + padding + '\n'.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string header("\x93NUMPY\x01\x00", 8);
  header.push_back(static_cast<char>(dict.size() & 0xff));
  header.push_back(static_cast<char>(dict.size() >> 8));
  return header + dict;
}

bool WriteNpy(const std::string& path, int64_t rows, int64_t cols,
              const std::vector<float>& values, std::string* error) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    *error = "cannot open " + path + " for writing";
    return false;
  }
  out << NpyHeader(rows, cols);
  static_assert(sizeof(float) == 4, "float32");
  // Little-endian hosts only (x86-64, aarch64): the bytes are written as is.
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
  out.close();
  if (!out) {
    *error = "writing " + path + " failed";
    return false;
  }
  return true;
}

}  // namespace encoder_client

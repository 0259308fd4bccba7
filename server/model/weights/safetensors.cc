#include "server/model/weights/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <limits>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "server/common/status_macros.h"

// The format is little-endian and tensors are copied byte for byte.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors I/O assumes a little-endian host");

namespace encoder::model {
namespace {

using Json = nlohmann::json;

constexpr char kMetadataKey[] = "__metadata__";
constexpr uint64_t kLengthPrefixBytes = 8;
// Deepest JSON nesting accepted in a header (serde_json's recursion limit); a
// valid header nests three levels deep.
constexpr int kMaxJsonDepth = 128;

struct Dtype {
  const char* name;
  at::ScalarType type;
  uint64_t size;
  // False for dtypes of the format refused by name (U16, U32, U64: LibTorch
  // has almost no operators for them).
  bool supported;
};

constexpr Dtype kDtypes[] = {
    {"BOOL", at::kBool, 1, true},     {"U8", at::kByte, 1, true},
    {"I8", at::kChar, 1, true},       {"I16", at::kShort, 2, true},
    {"U16", at::kShort, 2, false},    {"F16", at::kHalf, 2, true},
    {"BF16", at::kBFloat16, 2, true}, {"I32", at::kInt, 4, true},
    {"U32", at::kInt, 4, false},      {"F32", at::kFloat, 4, true},
    {"F64", at::kDouble, 8, true},    {"I64", at::kLong, 8, true},
    {"U64", at::kLong, 8, false},
};

const Dtype* FindDtype(absl::string_view name) {
  for (const Dtype& dtype : kDtypes) {
    if (name == dtype.name) return &dtype;
  }
  return nullptr;
}

const Dtype* FindDtype(at::ScalarType type) {
  for (const Dtype& dtype : kDtypes) {
    if (dtype.supported && dtype.type == type) return &dtype;
  }
  return nullptr;
}

// One validated header entry.
struct Entry {
  std::string name;
  const Dtype* dtype = nullptr;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Thrown only from the JSON parser callback to abort parsing; never escapes
// this file.
struct HeaderRejected : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string Quoted(absl::string_view name) {
  return absl::StrCat("\"", absl::CEscape(name), "\"");
}

absl::Status FileError(const std::string& source, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", message));
}

absl::Status TensorError(const std::string& source, absl::string_view name,
                         absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": tensor ", Quoted(name), ": ", message));
}

// Short description of a JSON value for error messages: scalars verbatim,
// containers by kind.
std::string Describe(const Json& value) {
  if (value.is_string()) return "a string";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// True (and sets *out) when `value` is an integer >= 0.
bool GetNonNegativeInteger(const Json& value, uint64_t* out) {
  if (value.is_number_unsigned()) {
    *out = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(value.get<int64_t>());
    return true;
  }
  return false;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Parses the header text; rejects syntax errors, nesting deeper than
// kMaxJsonDepth and duplicate top-level names.
absl::StatusOr<Json> ParseHeaderJson(const std::string& source,
                                     absl::string_view header) {
  std::set<std::string> names;
  auto callback = [&names](int depth, Json::parse_event_t event,
                           Json& parsed) -> bool {
    if ((event == Json::parse_event_t::object_start ||
         event == Json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      throw HeaderRejected(
          absl::StrCat("header nests deeper than ", kMaxJsonDepth, " levels"));
    }
    if (event == Json::parse_event_t::key && depth == 1 &&
        !names.insert(parsed.get<std::string>()).second) {
      throw HeaderRejected(absl::StrCat("header has duplicate entry ",
                                        Quoted(parsed.get<std::string>())));
    }
    return true;
  };
  try {
    return Json::parse(header.begin(), header.end(), callback);
  } catch (const HeaderRejected& e) {
    return FileError(source, e.what());
  } catch (const Json::exception& e) {
    return FileError(source,
                     absl::StrCat("header is not valid JSON: ", e.what()));
  } catch (const std::exception& e) {
    return FileError(source, absl::StrCat("cannot parse header: ", e.what()));
  }
}

absl::Status ParseMetadata(const std::string& source, const Json& value,
                           std::map<std::string, std::string>* metadata) {
  if (!value.is_object()) {
    return FileError(source, absl::StrCat(kMetadataKey, " is ", Describe(value),
                                          ", not an object of strings"));
  }
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return FileError(source,
                       absl::StrCat(kMetadataKey, " key ", Quoted(key), " is ",
                                    Describe(item), ", not a string"));
    }
    (*metadata)[key] = item.get<std::string>();
  }
  return absl::OkStatus();
}

// Validates one tensor entry on its own: fields, dtype, shape, and that its
// offsets lie within the buffer and hold exactly numel * dtype size bytes.
absl::Status ParseEntry(const std::string& source, const std::string& name,
                        const Json& value, uint64_t buffer_size, Entry* entry) {
  entry->name = name;
  if (!value.is_object()) {
    return TensorError(
        source, name,
        absl::StrCat("entry is ", Describe(value), ", not an object"));
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(field)) {
      return TensorError(source, name, absl::StrCat("missing \"", field, "\""));
    }
  }

  const Json& dtype = value["dtype"];
  if (!dtype.is_string()) {
    return TensorError(
        source, name,
        absl::StrCat("dtype is ", Describe(dtype), ", not a string"));
  }
  const std::string& dtype_name = dtype.get_ref<const std::string&>();
  entry->dtype = FindDtype(dtype_name);
  if (entry->dtype == nullptr) {
    return TensorError(source, name,
                       absl::StrCat("unknown dtype ", Quoted(dtype_name)));
  }
  if (!entry->dtype->supported) {
    return TensorError(
        source, name,
        absl::StrCat("unsupported dtype ", dtype_name,
                     " (LibTorch has no unsigned type of that width)"));
  }

  const Json& shape = value["shape"];
  if (!shape.is_array()) {
    return TensorError(
        source, name,
        absl::StrCat("shape is ", Describe(shape), ", not an array"));
  }
  // numel, and the product of the non-zero dims (which bounds the strides),
  // must both fit in int64_t.
  constexpr uint64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
  uint64_t numel = 1;
  uint64_t stride_span = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    uint64_t dim = 0;
    if (!GetNonNegativeInteger(shape[i], &dim)) {
      return TensorError(source, name,
                         absl::StrCat("shape[", i, "] is ", Describe(shape[i]),
                                      ", not a non-negative integer"));
    }
    if (dim > kMaxInt64 || (dim > 0 && stride_span > kMaxInt64 / dim)) {
      return TensorError(source, name,
                         absl::StrCat("shape has more elements than int64 "
                                      "holds (at shape[",
                                      i, "] = ", dim, ")"));
    }
    if (dim > 0) stride_span *= dim;
    numel *= dim;
    entry->shape.push_back(static_cast<int64_t>(dim));
  }

  const Json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 ||
      !GetNonNegativeInteger(offsets[0], &entry->begin) ||
      !GetNonNegativeInteger(offsets[1], &entry->end)) {
    return TensorError(
        source, name,
        absl::StrCat("data_offsets must be [begin, end] of non-negative "
                     "integers, got ",
                     offsets.is_array()
                         ? absl::StrCat("an array of ", offsets.size())
                         : Describe(offsets)));
  }
  const std::string offsets_text =
      absl::StrCat("data_offsets [", entry->begin, ", ", entry->end, "]");
  if (entry->begin > entry->end) {
    return TensorError(source, name,
                       absl::StrCat(offsets_text, " have begin > end"));
  }
  if (entry->end > buffer_size) {
    return TensorError(source, name,
                       absl::StrCat(offsets_text, " end beyond the ",
                                    buffer_size, "-byte data buffer"));
  }
  const uint64_t held = entry->end - entry->begin;
  const bool overflows =
      numel > std::numeric_limits<uint64_t>::max() / entry->dtype->size;
  if (overflows || held != numel * entry->dtype->size) {
    return TensorError(
        source, name,
        absl::StrCat(offsets_text, " hold ", held, " bytes but shape ",
                     ShapeString(entry->shape), " of ", entry->dtype->name,
                     " needs ",
                     overflows ? "more than 2^64"
                               : absl::StrCat(numel * entry->dtype->size)));
  }
  return absl::OkStatus();
}

// Checks that the entries' byte ranges, sorted, tile [0, buffer_size) exactly.
absl::Status CheckTiling(const std::string& source,
                         std::vector<const Entry*> entries,
                         uint64_t buffer_size) {
  std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry* entry : entries) {
    if (entry->begin < covered) {
      return TensorError(
          source, entry->name,
          absl::StrCat("data_offsets [", entry->begin, ", ", entry->end,
                       "] overlap tensor ", Quoted(previous->name), " at [",
                       previous->begin, ", ", previous->end, "]"));
    }
    if (entry->begin > covered) {
      return TensorError(
          source, entry->name,
          absl::StrCat("hole of unused bytes [", covered, ", ", entry->begin,
                       ") before this tensor's data"));
    }
    covered = entry->end;
    previous = entry;
  }
  if (covered != buffer_size) {
    return FileError(
        source, absl::StrCat(buffer_size - covered,
                             " trailing bytes after the last tensor (data "
                             "ends at ",
                             covered, " of a ", buffer_size, "-byte buffer)"));
  }
  return absl::OkStatus();
}

// Copies an entry's bytes into a new tensor that owns its memory.
absl::StatusOr<at::Tensor> MakeTensor(const std::string& source,
                                      const Entry& entry, const char* data) {
  const char* begin = data + entry.begin;
  const size_t size = entry.end - entry.begin;
  if (entry.dtype->type == at::kBool) {
    const char* bad = std::find_if(begin, begin + size,
                                   [](char c) { return c != 0 && c != 1; });
    if (bad != begin + size) {
      return TensorError(
          source, entry.name,
          absl::StrCat("BOOL element ", bad - begin, " is byte ",
                       static_cast<int>(static_cast<unsigned char>(*bad)),
                       ", not 0 or 1"));
    }
  }
  try {
    at::Tensor tensor =
        at::empty(entry.shape, at::TensorOptions().dtype(entry.dtype->type));
    if (size > 0) std::memcpy(tensor.data_ptr(), begin, size);
    return tensor;
  } catch (const std::exception& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat(source, ": tensor ", Quoted(entry.name),
                     ": cannot allocate: ", e.what()));
  }
}

}  // namespace

namespace {

// The validated header of an image: its entries, metadata and where the data
// buffer starts.
struct ParsedHeader {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;
};

absl::StatusOr<ParsedHeader> ParseHeader(absl::string_view bytes,
                                         const std::string& source) {
  if (bytes.size() < kLengthPrefixBytes) {
    return FileError(source, absl::StrCat("file is ", bytes.size(),
                                          " bytes, shorter than the 8-byte "
                                          "header length"));
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) {
    header_size = (header_size << 8) | static_cast<unsigned char>(bytes[i]);
  }
  if (header_size > kMaxSafetensorsHeaderBytes) {
    return FileError(source, absl::StrCat("header length ", header_size,
                                          " exceeds the limit of ",
                                          kMaxSafetensorsHeaderBytes));
  }
  const uint64_t available = bytes.size() - kLengthPrefixBytes;
  if (header_size > available) {
    return FileError(source, absl::StrCat("header length ", header_size,
                                          " is larger than the ", available,
                                          " bytes after the length"));
  }
  const absl::string_view header(bytes.data() + kLengthPrefixBytes,
                                 header_size);
  if (header.empty() || header.front() != '{') {
    return FileError(source, "header does not start with '{'");
  }
  ASSIGN_OR_RETURN(Json json, ParseHeaderJson(source, header));

  const uint64_t buffer_size = available - header_size;
  ParsedHeader parsed;
  parsed.data_start = kLengthPrefixBytes + header_size;
  parsed.entries.reserve(json.size());
  for (const auto& [name, value] : json.items()) {
    if (name == kMetadataKey) {
      RETURN_IF_ERROR(ParseMetadata(source, value, &parsed.metadata));
      continue;
    }
    // Keys other than dtype, shape and data_offsets are ignored, as in the
    // reference implementation.
    Entry& entry = parsed.entries.emplace_back();
    RETURN_IF_ERROR(ParseEntry(source, name, value, buffer_size, &entry));
  }

  std::vector<const Entry*> ranges;
  for (const Entry& entry : parsed.entries) ranges.push_back(&entry);
  RETURN_IF_ERROR(CheckTiling(source, std::move(ranges), buffer_size));
  return parsed;
}

}  // namespace

absl::StatusOr<SafetensorsLayout> ParseSafetensorsLayout(
    absl::string_view bytes, const std::string& source) {
  ASSIGN_OR_RETURN(ParsedHeader parsed, ParseHeader(bytes, source));
  SafetensorsLayout layout;
  layout.metadata = std::move(parsed.metadata);
  for (const Entry& entry : parsed.entries) {
    TensorLayout& t = layout.tensors[entry.name];
    t.dtype = entry.dtype->type;
    t.shape = entry.shape;
    t.begin = parsed.data_start + entry.begin;
    t.end = parsed.data_start + entry.end;
  }
  return layout;
}

absl::StatusOr<SafetensorsFile> ParseSafetensors(const std::string& bytes,
                                                 const std::string& source) {
  ASSIGN_OR_RETURN(ParsedHeader parsed, ParseHeader(bytes, source));
  const char* data = bytes.data() + parsed.data_start;
  SafetensorsFile file;
  file.metadata = std::move(parsed.metadata);
  for (const Entry& entry : parsed.entries) {
    ASSIGN_OR_RETURN(at::Tensor tensor, MakeTensor(source, entry, data));
    file.tensors.emplace(entry.name, std::move(tensor));
  }
  return file;
}

absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  }
  std::string bytes;
  absl::Status status;
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot stat"));
  } else if (!S_ISREG(info.st_mode)) {
    status = FileError(path, "not a regular file");
  } else {
    bytes.resize(static_cast<size_t>(info.st_size));
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status =
            absl::ErrnoToStatus(errno, absl::StrCat(path, ": read failed"));
        break;
      }
      if (n == 0) {
        status = absl::DataLossError(
            absl::StrCat(path, ": file shrank while being read"));
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (!status.ok()) return status;
  return ParseSafetensors(bytes, path);
}

absl::StatusOr<std::string> SerializeSafetensors(
    const std::map<std::string, at::Tensor>& tensors,
    const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::vector<at::Tensor> contiguous;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == kMetadataKey) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor name ", Quoted(name), " is reserved"));
    }
    if (!tensor.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", Quoted(name), " is undefined"));
    }
    if (!tensor.device().is_cpu() || tensor.layout() != at::kStrided) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", Quoted(name), " is on ", tensor.device().str(),
          "; only dense CPU tensors can be serialized"));
    }
    const Dtype* dtype = FindDtype(tensor.scalar_type());
    if (dtype == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", Quoted(name), " has unsupported dtype ",
                       c10::toString(tensor.scalar_type())));
    }
    contiguous.push_back(tensor.contiguous());
    const uint64_t size = contiguous.back().nbytes();
    header[name] = {{"dtype", dtype->name},
                    {"shape", tensor.sizes().vec()},
                    {"data_offsets", {offset, offset + size}}};
    offset += size;
  }

  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor names and metadata must be valid UTF-8: ", e.what()));
  }
  // Pad so that the data buffer starts 8-byte aligned.
  text.append((kLengthPrefixBytes - text.size() % kLengthPrefixBytes) %
                  kLengthPrefixBytes,
              ' ');

  std::string out;
  out.reserve(kLengthPrefixBytes + text.size() + offset);
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) {
    out.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xff));
  }
  out += text;
  for (const at::Tensor& tensor : contiguous) {
    if (tensor.nbytes() == 0) continue;
    out.append(static_cast<const char*>(tensor.data_ptr()), tensor.nbytes());
  }
  return out;
}

}  // namespace encoder::model

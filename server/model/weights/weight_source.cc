#include "server/model/weights/weight_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/torch_status.h"

namespace encoder::model {
namespace {

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

bool Exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

}  // namespace

// A read-only private mapping of one file.
struct WeightSource::MappedFile {
  std::string path;
  const char* data = nullptr;
  size_t size = 0;

  ~MappedFile() {
    if (data != nullptr && size > 0) {
      ::munmap(const_cast<char*>(data), size);
    }
  }
};

WeightSource::~WeightSource() = default;

absl::Status WeightSource::AddFile(
    const std::string& path, const std::vector<std::string>* expected_names) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  }
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a readable regular file"));
  }
  auto file = std::make_unique<MappedFile>();
  file->path = path;
  file->size = static_cast<size_t>(info.st_size);
  if (file->size > 0) {
    void* map = ::mmap(nullptr, file->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      ::close(fd);
      return absl::ResourceExhaustedError(
          absl::StrCat(path, ": cannot map (", std::strerror(errno), ")"));
    }
    file->data = static_cast<const char*>(map);
  }
  ::close(fd);
  ASSIGN_OR_RETURN(
      auto layout,
      ParseSafetensorsLayout(absl::string_view(file->data, file->size), path));
  if (expected_names != nullptr) {
    for (const std::string& name : *expected_names) {
      if (layout.tensors.count(name) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(kIndexFile, " places tensor \"", name, "\" in ", path,
                         ", which does not hold it"));
      }
    }
  }
  for (auto& [name, t] : layout.tensors) {
    if (layouts_.count(name) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", name, "\" is stored in two shards (",
                       files_[file_of_[name]]->path, " and ", path, ")"));
    }
    layouts_[name] = t;
    file_of_[name] = files_.size();
  }
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WeightSource>> WeightSource::Open(
    const std::string& dir) {
  std::unique_ptr<WeightSource> source(new WeightSource());
  const std::string index_path = absl::StrCat(dir, "/", kIndexFile);
  const std::string single_path = absl::StrCat(dir, "/", kSingleFile);
  if (!Exists(index_path)) {
    if (!Exists(single_path)) {
      return absl::NotFoundError(
          absl::StrCat(dir, " has neither ", kSingleFile, " nor ", kIndexFile,
                       " (only safetensors checkpoints are read)"));
    }
    RETURN_IF_ERROR(source->AddFile(single_path, nullptr));
    return source;
  }
  std::ifstream in(index_path);
  std::stringstream text;
  text << in.rdbuf();
  using nlohmann::json;
  json index = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object() ||
      !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        index_path, ": not a JSON object with a \"weight_map\" object"));
  }
  std::map<std::string, std::vector<std::string>> by_shard;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string() ||
        shard.get<std::string>().find('/') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map[\"", name,
                       "\"] must be a file name in the directory"));
    }
    by_shard[shard.get<std::string>()].push_back(name);
  }
  for (const auto& [shard, names] : by_shard) {
    const std::string path = absl::StrCat(dir, "/", shard);
    if (!Exists(path)) {
      return absl::NotFoundError(
          absl::StrCat("missing shard ", shard, ": ", kIndexFile, " places ",
                       names.size(), " tensors (e.g. \"", names.front(),
                       "\") there, but ", path, " does not exist"));
    }
    RETURN_IF_ERROR(source->AddFile(path, &names));
  }
  return source;
}

int64_t WeightSource::stored_bytes() const {
  int64_t n = 0;
  for (const auto& [name, t] : layouts_) {
    if (at::isFloatingType(t.dtype)) n += static_cast<int64_t>(t.end - t.begin);
  }
  return n;
}

absl::StatusOr<at::Tensor> WeightSource::Load(const std::string& name,
                                              at::ScalarType dtype) {
  auto it = layouts_.find(name);
  if (it == layouts_.end()) {
    return absl::NotFoundError(absl::StrCat("no tensor \"", name, "\""));
  }
  const TensorLayout& t = it->second;
  const MappedFile& file = *files_[file_of_.at(name)];
  try {
    at::Tensor out = at::empty(t.shape, at::TensorOptions().dtype(dtype));
    if (t.end > t.begin) {
      at::Tensor view = at::from_blob(const_cast<char*>(file.data) + t.begin,
                                      t.shape, at::TensorOptions(t.dtype));
      out.copy_(view);
      // Give the mapped pages wholly inside this tensor back to the kernel:
      // they are clean file pages, re-read on demand if ever touched again.
      const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
      const uintptr_t base = reinterpret_cast<uintptr_t>(file.data);
      const uintptr_t lo = (base + t.begin + page - 1) / page * page;
      const uintptr_t hi = (base + t.end) / page * page;
      if (hi > lo) {
        ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
      }
    }
    return out;
  } catch (const c10::Error& e) {
    return StatusFromTorchError(e, absl::StrCat("loading tensor ", name));
  }
}

}  // namespace encoder::model

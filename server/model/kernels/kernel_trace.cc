#include "server/model/kernels/kernel_trace.h"

#include <ATen/native/verbose_wrapper.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace encoder::model {
namespace {

constexpr absl::string_view kOneDnnPrefix = "onednn_verbose,";
constexpr absl::string_view kMklPrefix = "MKL_VERBOSE ";

// The libraries print their headers once per process; later traces reuse
// what the first one read.
std::mutex& TraceMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}
KernelTrace& Headers() {
  static auto* h = new KernelTrace();
  return *h;
}

// The data type of a memory descriptor such as "src:u8:a:blocked:ab::f0"
// (oneDNN 3.x: argument, data type, properties, format...).
std::string DataType(absl::string_view md) {
  std::vector<absl::string_view> parts = absl::StrSplit(md, ':');
  return parts.size() > 1 ? std::string(parts[1]) : std::string();
}

// The rows (M) of a product from oneDNN's problem descriptor: matmul's
// (and the brgemm ukernel's) "32x384:384x384" (the source's dimensions but the
// last, multiplied) or inner product's "mb32ic384oc384".
int64_t Rows(absl::string_view primitive, absl::string_view problem) {
  if (primitive == "matmul" || primitive == "brgemm") {
    std::vector<absl::string_view> operands = absl::StrSplit(problem, ':');
    std::vector<absl::string_view> dims = absl::StrSplit(operands[0], 'x');
    if (dims.size() < 2) return 0;
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < dims.size(); ++i) {
      int64_t d = 0;
      if (!absl::SimpleAtoi(dims[i], &d)) return 0;
      rows *= d;
    }
    return rows;
  }
  if (absl::ConsumePrefix(&problem, "mb")) {
    size_t digits = 0;
    while (digits < problem.size() && absl::ascii_isdigit(problem[digits])) {
      ++digits;
    }
    int64_t rows = 0;
    if (absl::SimpleAtoi(problem.substr(0, digits), &rows)) return rows;
  }
  return 0;
}

void Add(KernelUse use, KernelTrace* trace) {
  for (KernelUse& k : trace->kernels) {
    if (k.library == use.library && k.primitive == use.primitive &&
        k.impl == use.impl && k.types == use.types) {
      ++k.calls;
      if (use.min_rows > 0) {
        k.min_rows =
            k.min_rows > 0 ? std::min(k.min_rows, use.min_rows) : use.min_rows;
        k.max_rows = std::max(k.max_rows, use.max_rows);
      }
      return;
    }
  }
  use.calls = 1;
  trace->kernels.push_back(std::move(use));
}

void ParseOneDnn(absl::string_view line, KernelTrace* trace) {
  std::vector<absl::string_view> f = absl::StrSplit(line, ',');
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == "info" && i + 2 < f.size() && f[i + 1] == "cpu" &&
        absl::StartsWith(f[i + 2], "isa:")) {
      trace->onednn_isa = std::string(f[i + 2].substr(4));
      return;
    }
    // exec, engine, primitive, implementation, prop_kind, memory
    // descriptors, attributes, auxiliary, problem, time.
    if (f[i] != "exec" || i + 8 >= f.size()) continue;
    if (f[i + 1] != "cpu") return;
    const absl::string_view primitive = f[i + 2];
    if (primitive == "reorder") return;
    KernelUse use;
    use.library = "onednn";
    use.primitive = std::string(primitive);
    use.impl = std::string(f[i + 3]);
    // oneDNN's ukernels (LibTorch's bfloat16 fused attention calls the
    // brgemm one) name no implementation.
    if (use.impl.empty() && i > 0 && f[i - 1] == "ukernel") {
      use.impl = "ukernel";
    }
    std::string src, wei, dst;
    for (absl::string_view md : absl::StrSplit(f[i + 5], ' ')) {
      if (absl::StartsWith(md, "src:")) src = DataType(md);
      if (absl::StartsWith(md, "wei:")) wei = DataType(md);
      if (absl::StartsWith(md, "dst:")) dst = DataType(md);
    }
    use.types = wei.empty() ? absl::StrCat(src, "->", dst)
                            : absl::StrCat(src, ":", wei, "->", dst);
    use.min_rows = use.max_rows = Rows(primitive, f[i + 8]);
    Add(std::move(use), trace);
    return;
  }
}

void ParseMkl(absl::string_view line, KernelTrace* trace) {
  // The header: "MKL_VERBOSE oneMKL 2024.0 ... for Intel(R) 64
  // architecture <instruction sets>, Lnx 2.60GHz lp64 gnu_thread".
  if (size_t at = line.find(" architecture "); at != absl::string_view::npos) {
    absl::string_view isa = line.substr(at + 14);
    if (size_t end = isa.rfind(", Lnx"); end != absl::string_view::npos) {
      isa = isa.substr(0, end);
    }
    trace->mkl_isa = std::string(absl::StripAsciiWhitespace(isa));
    return;
  }
  // A call: "MKL_VERBOSE SGEMM(T,N,384,32,384,...) 379.67us ...".
  const size_t paren = line.find('(');
  if (paren == absl::string_view::npos) return;
  absl::string_view function = line.substr(0, paren);
  if (function.empty() || function.find(' ') != absl::string_view::npos) {
    return;
  }
  KernelUse use;
  use.library = "mkl";
  use.primitive = std::string(function);
  Add(std::move(use), trace);
}

bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && absl::string_view(v) != "0";
}

}  // namespace

std::string KernelUse::ToString() const {
  std::string s = absl::StrCat(library, " ", primitive);
  if (!impl.empty()) absl::StrAppend(&s, " ", impl);
  if (!types.empty()) absl::StrAppend(&s, " ", types);
  if (min_rows > 0) {
    absl::StrAppend(&s, " rows ", min_rows);
    if (max_rows != min_rows) absl::StrAppend(&s, "-", max_rows);
  }
  absl::StrAppend(&s, " (", calls, calls == 1 ? " call)" : " calls)");
  return s;
}

void ParseTraceLine(absl::string_view line, KernelTrace* trace) {
  line = absl::StripTrailingAsciiWhitespace(line);
  if (absl::ConsumePrefix(&line, kOneDnnPrefix)) {
    ParseOneDnn(line, trace);
  } else if (absl::ConsumePrefix(&line, kMklPrefix)) {
    ParseMkl(line, trace);
  }
}

KernelTrace TraceKernels(const std::function<absl::Status()>& work,
                         absl::Status* work_status) {
  std::lock_guard<std::mutex> lock(TraceMutex());
  KernelTrace trace;
  const bool user_onednn = EnvSet("ONEDNN_VERBOSE") || EnvSet("DNNL_VERBOSE");
  const bool user_mkl = EnvSet("MKL_VERBOSE");
  std::fflush(stdout);
  FILE* file = std::tmpfile();
  const int saved = file != nullptr ? ::dup(STDOUT_FILENO) : -1;
  if (saved < 0 || ::dup2(::fileno(file), STDOUT_FILENO) < 0) {
    // No trace without a place to divert it to; the work still runs.
    if (saved >= 0) ::close(saved);
    if (file != nullptr) std::fclose(file);
    *work_status = work();
    return trace;
  }
  if (!user_onednn) torch::verbose::_mkldnn_set_verbose(1);
  if (!user_mkl) torch::verbose::_mkl_set_verbose(1);
  *work_status = work();
  if (!user_onednn) torch::verbose::_mkldnn_set_verbose(0);
  if (!user_mkl) torch::verbose::_mkl_set_verbose(0);
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);

  std::rewind(file);
  char* buffer = nullptr;
  size_t capacity = 0;
  ssize_t n;
  while ((n = ::getline(&buffer, &capacity, file)) > 0) {
    const absl::string_view line(buffer, static_cast<size_t>(n));
    const bool onednn = absl::StartsWith(line, kOneDnnPrefix);
    const bool mkl = absl::StartsWith(line, kMklPrefix);
    ParseTraceLine(line, &trace);
    if ((!onednn && !mkl) || (onednn && user_onednn) || (mkl && user_mkl)) {
      std::fwrite(buffer, 1, static_cast<size_t>(n), stdout);
    }
  }
  std::free(buffer);
  std::fclose(file);
  std::fflush(stdout);

  KernelTrace& headers = Headers();
  if (trace.onednn_isa.empty()) {
    trace.onednn_isa = headers.onednn_isa;
  } else {
    headers.onednn_isa = trace.onednn_isa;
  }
  if (trace.mkl_isa.empty()) {
    trace.mkl_isa = headers.mkl_isa;
  } else {
    headers.mkl_isa = trace.mkl_isa;
  }
  return trace;
}

}  // namespace encoder::model

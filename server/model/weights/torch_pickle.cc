#include "server/model/weights/torch_pickle.h"

#include <caffe2/serialize/inline_container.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/common/status_macros.h"

namespace encoder::model {
namespace {

// A value on the pickle machine's stack. Dictionaries keep their entries
// as alternating keys and values, in insertion order.
struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kText,
    kTuple,
    kList,
    kDict,
    kGlobal,
    kStorage,
    kTensor
  };
  Kind kind = Kind::kNone;
  int64_t number = 0;
  double real = 0;
  std::string text;  // kText; kGlobal: "module.name"
  std::vector<std::shared_ptr<Value>> items;
  at::Tensor tensor;  // kStorage (1-D) or kTensor
};
using ValuePtr = std::shared_ptr<Value>;

ValuePtr Make(Value::Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

// The typed storages torch.save names (torch.FloatStorage, ...).
bool StorageType(const std::string& global, at::ScalarType* dtype) {
  static const std::map<std::string, at::ScalarType> kTypes = {
      {"torch.FloatStorage", at::kFloat},
      {"torch.DoubleStorage", at::kDouble},
      {"torch.HalfStorage", at::kHalf},
      {"torch.BFloat16Storage", at::kBFloat16},
      {"torch.LongStorage", at::kLong},
      {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},
      {"torch.CharStorage", at::kChar},
      {"torch.ByteStorage", at::kByte},
      {"torch.BoolStorage", at::kBool}};
  auto it = kTypes.find(global);
  if (it == kTypes.end()) return false;
  if (dtype != nullptr) *dtype = it->second;
  return true;
}

bool KnownGlobal(const std::string& global) {
  return global == "collections.OrderedDict" ||
         global == "torch._utils._rebuild_tensor_v2" ||
         global == "torch._utils._rebuild_parameter" ||
         StorageType(global, nullptr);
}

class PickleMachine {
 public:
  PickleMachine(std::string_view pickle, TorchStorageLoader load)
      : in_(pickle), load_(std::move(load)) {}
  // A pickle may put a container into itself (SETITEM of a memo get of
  // the dict, ...): every value made is emptied here, so that such cycles
  // of shared pointers are freed with the machine.
  ~PickleMachine() {
    for (const std::weak_ptr<Value>& made : made_) {
      if (ValuePtr v = made.lock()) v->items.clear();
    }
  }
  PickleMachine(const PickleMachine&) = delete;
  PickleMachine& operator=(const PickleMachine&) = delete;

  absl::StatusOr<ValuePtr> Run() {
    while (true) {
      uint8_t op = 0;
      if (!Byte(&op)) return Bad("the pickle ends before its STOP");
      if (op == '.') {
        if (stack_.size() != 1) return Bad("STOP with a stack not of one");
        return stack_.back();
      }
      RETURN_IF_ERROR(Step(op));
      if (stack_.size() > (1u << 20)) return Bad("the stack is too deep");
    }
  }

 private:
  // A value of `kind`, remembered so that the destructor can empty it.
  ValuePtr New(Value::Kind kind) {
    ValuePtr v = Make(kind);
    made_.push_back(v);
    return v;
  }
  static absl::Status Bad(const std::string& why) {
    return absl::InvalidArgumentError(why);
  }

  bool Read(size_t n, std::string_view* out) {
    if (in_.size() - pos_ < n) return false;
    *out = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool Byte(uint8_t* b) {
    std::string_view s;
    if (!Read(1, &s)) return false;
    *b = static_cast<uint8_t>(s[0]);
    return true;
  }
  // An unsigned little-endian integer of `n` bytes (n <= 8).
  absl::StatusOr<uint64_t> Unsigned(size_t n) {
    std::string_view s;
    if (!Read(n, &s)) return Bad("the pickle ends inside an argument");
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) {
      v |= static_cast<uint64_t>(static_cast<uint8_t>(s[i])) << (8 * i);
    }
    return v;
  }
  absl::StatusOr<std::string> Line() {
    const size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos) return Bad("GLOBAL without a newline");
    std::string s(in_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }

  absl::StatusOr<ValuePtr> Pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) {
      return Bad("an opcode pops an empty stack");
    }
    ValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  // The values above the last MARK, which is dropped.
  absl::StatusOr<std::vector<ValuePtr>> PopMark() {
    if (marks_.empty()) return Bad("an opcode needs a MARK that is not there");
    const size_t at = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> items(stack_.begin() + at, stack_.end());
    stack_.resize(at);
    return items;
  }
  absl::StatusOr<ValuePtr> Top(Value::Kind kind, const char* op) {
    if (stack_.empty() || stack_.back()->kind != kind) {
      return Bad(absl::StrCat(op, " on a value of the wrong kind"));
    }
    return stack_.back();
  }
  void Push(ValuePtr v) { stack_.push_back(std::move(v)); }
  void PushInt(int64_t n) {
    ValuePtr v = New(Value::Kind::kInt);
    v->number = n;
    Push(std::move(v));
  }
  void PushTuple(std::vector<ValuePtr> items) {
    ValuePtr v = New(Value::Kind::kTuple);
    v->items = std::move(items);
    Push(std::move(v));
  }
  absl::Status PushText(size_t length_bytes) {
    ASSIGN_OR_RETURN(const uint64_t n, Unsigned(length_bytes));
    std::string_view s;
    if (!Read(n, &s)) return Bad("the pickle ends inside a text");
    ValuePtr v = New(Value::Kind::kText);
    v->text = std::string(s);
    Push(std::move(v));
    return absl::OkStatus();
  }
  absl::Status PushGlobal(std::string module, const std::string& name) {
    std::string global = absl::StrCat(module, ".", name);
    if (!KnownGlobal(global)) {
      return Bad(absl::StrCat(
          "it names the global ", global,
          ", which a dictionary of tensors does not need (only "
          "collections.OrderedDict, torch._utils._rebuild_tensor_v2, "
          "torch._utils._rebuild_parameter and torch.*Storage are read)"));
    }
    ValuePtr v = New(Value::Kind::kGlobal);
    v->text = std::move(global);
    Push(std::move(v));
    return absl::OkStatus();
  }
  absl::Status Put(uint64_t index) {
    if (stack_.empty()) return Bad("a memo put on an empty stack");
    memo_[index] = stack_.back();
    return absl::OkStatus();
  }
  absl::Status Get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return Bad("a memo get of an index never put");
    Push(it->second);
    return absl::OkStatus();
  }
  absl::Status SetItems(const std::vector<ValuePtr>& items) {
    if (items.size() % 2 != 0) return Bad("SETITEMS with an odd count");
    ASSIGN_OR_RETURN(ValuePtr dict, Top(Value::Kind::kDict, "SETITEMS"));
    for (const ValuePtr& item : items) dict->items.push_back(item);
    return absl::OkStatus();
  }
  absl::Status Append(const std::vector<ValuePtr>& items) {
    ASSIGN_OR_RETURN(ValuePtr list, Top(Value::Kind::kList, "APPENDS"));
    for (const ValuePtr& item : items) list->items.push_back(item);
    return absl::OkStatus();
  }

  absl::Status PersistentLoad() {
    ASSIGN_OR_RETURN(ValuePtr pid, Pop());
    at::ScalarType dtype = at::kFloat;
    if (pid->kind != Value::Kind::kTuple || pid->items.size() != 5 ||
        pid->items[0]->kind != Value::Kind::kText ||
        pid->items[0]->text != "storage" ||
        pid->items[1]->kind != Value::Kind::kGlobal ||
        !StorageType(pid->items[1]->text, &dtype) ||
        pid->items[2]->kind != Value::Kind::kText ||
        pid->items[4]->kind != Value::Kind::kInt || pid->items[4]->number < 0) {
      return Bad(
          "a persistent id that is not ('storage', type, key, location, "
          "size)");
    }
    ASSIGN_OR_RETURN(at::Tensor storage,
                     load_(pid->items[2]->text, dtype, pid->items[4]->number));
    ValuePtr v = New(Value::Kind::kStorage);
    v->tensor = std::move(storage);
    Push(std::move(v));
    return absl::OkStatus();
  }

  static absl::StatusOr<std::vector<int64_t>> Ints(const ValuePtr& v,
                                                   const char* what) {
    if (v->kind != Value::Kind::kTuple) {
      return Bad(absl::StrCat("a tensor's ", what, " is not a tuple"));
    }
    std::vector<int64_t> out;
    for (const ValuePtr& item : v->items) {
      if (item->kind != Value::Kind::kInt || item->number < 0 ||
          item->number > (int64_t{1} << 40)) {
        return Bad(
            absl::StrCat("a tensor's ", what, " holds something but counts"));
      }
      out.push_back(item->number);
    }
    return out;
  }

  // _rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
  // backward_hooks[, metadata]).
  static absl::StatusOr<ValuePtr> RebuildTensor(const ValuePtr& args) {
    if (args->items.size() < 4 ||
        args->items[0]->kind != Value::Kind::kStorage ||
        args->items[1]->kind != Value::Kind::kInt) {
      return Bad("_rebuild_tensor_v2 without (storage, offset, size, stride)");
    }
    const at::Tensor& storage = args->items[0]->tensor;
    const int64_t offset = args->items[1]->number;
    ASSIGN_OR_RETURN(const std::vector<int64_t> size,
                     Ints(args->items[2], "size"));
    ASSIGN_OR_RETURN(const std::vector<int64_t> stride,
                     Ints(args->items[3], "stride"));
    if (size.size() != stride.size() || offset < 0 || size.size() > 64) {
      return Bad("a tensor whose size and stride differ in rank");
    }
    int64_t last = offset;
    int64_t values = 1;
    bool empty = false;
    for (size_t d = 0; d < size.size(); ++d) {
      if (size[d] == 0) empty = true;
      values = size[d] > 0 && values > storage.numel() / size[d]
                   ? storage.numel() + 1
                   : values * size[d];
      if (size[d] > 0 && stride[d] > (int64_t{1} << 40) / size[d]) {
        return Bad("a tensor's stride is out of range");
      }
      if (size[d] > 0) last += (size[d] - 1) * stride[d];
    }
    // More values than the storage holds: an expanded view (a stride of
    // 0), which a state dictionary's parameters never are.
    if (!empty && values > storage.numel()) {
      return Bad(absl::StrCat("a tensor of more values than its storage's ",
                              storage.numel(), " (an expanded view)"));
    }
    ValuePtr v = Make(Value::Kind::kTensor);  // holds no items
    if (empty) {
      v->tensor = at::empty(size, storage.options());
    } else if (last >= storage.numel()) {
      return Bad(absl::StrCat("a tensor reaches value ", last,
                              " of a storage of ", storage.numel()));
    } else {
      v->tensor = storage.as_strided(size, stride, offset).contiguous().clone();
    }
    return v;
  }

  absl::Status Reduce() {
    ASSIGN_OR_RETURN(ValuePtr args, Pop());
    ASSIGN_OR_RETURN(ValuePtr callable, Pop());
    if (callable->kind != Value::Kind::kGlobal ||
        args->kind != Value::Kind::kTuple) {
      return Bad("REDUCE of something not a known global on a tuple");
    }
    const std::string& f = callable->text;
    if (f == "collections.OrderedDict" && args->items.empty()) {
      Push(New(Value::Kind::kDict));
    } else if (f == "torch._utils._rebuild_tensor_v2") {
      ASSIGN_OR_RETURN(ValuePtr t, RebuildTensor(args));
      Push(std::move(t));
    } else if (f == "torch._utils._rebuild_parameter" && !args->items.empty() &&
               args->items[0]->kind == Value::Kind::kTensor) {
      Push(args->items[0]);
    } else {
      return Bad(absl::StrCat("REDUCE of ", f, " on arguments it never has"));
    }
    return absl::OkStatus();
  }

  // BUILD: an OrderedDict's attributes (a state dictionary's _metadata,
  // which holds module versions) change no tensor and are dropped.
  absl::Status Build() {
    ASSIGN_OR_RETURN(ValuePtr state, Pop());
    (void)state;
    ASSIGN_OR_RETURN(ValuePtr dict, Top(Value::Kind::kDict, "BUILD"));
    (void)dict;
    return absl::OkStatus();
  }

  absl::Status Step(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        ASSIGN_OR_RETURN(const uint64_t v, Unsigned(1));
        if (v > 5) return Bad(absl::StrCat("pickle protocol ", v));
        return absl::OkStatus();
      }
      case 0x95: {  // FRAME
        ASSIGN_OR_RETURN(const uint64_t n, Unsigned(8));
        (void)n;
        return absl::OkStatus();
      }
      case '(':
        marks_.push_back(stack_.size());
        return absl::OkStatus();
      case '}':
        Push(New(Value::Kind::kDict));
        return absl::OkStatus();
      case ']':
        Push(New(Value::Kind::kList));
        return absl::OkStatus();
      case ')':
        PushTuple({});
        return absl::OkStatus();
      case 't': {
        ASSIGN_OR_RETURN(auto items, PopMark());
        PushTuple(std::move(items));
        return absl::OkStatus();
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        std::vector<ValuePtr> items(op - 0x84);
        for (size_t i = items.size(); i-- > 0;) {
          ASSIGN_OR_RETURN(items[i], Pop());
        }
        PushTuple(std::move(items));
        return absl::OkStatus();
      }
      case 'N':
        Push(New(Value::Kind::kNone));
        return absl::OkStatus();
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        ValuePtr v = New(Value::Kind::kBool);
        v->number = op == 0x88 ? 1 : 0;
        Push(std::move(v));
        return absl::OkStatus();
      }
      case 'K':
      case 'M': {  // BININT1, BININT2
        ASSIGN_OR_RETURN(const uint64_t v, Unsigned(op == 'K' ? 1 : 2));
        PushInt(static_cast<int64_t>(v));
        return absl::OkStatus();
      }
      case 'J': {  // BININT
        ASSIGN_OR_RETURN(const uint64_t v, Unsigned(4));
        PushInt(static_cast<int32_t>(static_cast<uint32_t>(v)));
        return absl::OkStatus();
      }
      case 0x8a: {  // LONG1
        ASSIGN_OR_RETURN(const uint64_t n, Unsigned(1));
        if (n > 8) return Bad("an integer wider than 64 bits");
        if (n == 0) {
          PushInt(0);
          return absl::OkStatus();
        }
        ASSIGN_OR_RETURN(uint64_t v, Unsigned(n));
        if (n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
        PushInt(static_cast<int64_t>(v));
        return absl::OkStatus();
      }
      case 'G': {  // BINFLOAT, big-endian
        ASSIGN_OR_RETURN(const uint64_t le, Unsigned(8));
        const uint64_t be = __builtin_bswap64(le);
        ValuePtr v = New(Value::Kind::kFloat);
        std::memcpy(&v->real, &be, sizeof(double));
        Push(std::move(v));
        return absl::OkStatus();
      }
      case 'X':  // BINUNICODE
        return PushText(4);
      case 0x8c:  // SHORT_BINUNICODE
        return PushText(1);
      case 0x8d:  // BINUNICODE8
        return PushText(8);
      case 'c': {  // GLOBAL
        ASSIGN_OR_RETURN(std::string module, Line());
        ASSIGN_OR_RETURN(std::string name, Line());
        return PushGlobal(std::move(module), name);
      }
      case 0x93: {  // STACK_GLOBAL
        ASSIGN_OR_RETURN(ValuePtr name, Pop());
        ASSIGN_OR_RETURN(ValuePtr module, Pop());
        if (name->kind != Value::Kind::kText ||
            module->kind != Value::Kind::kText) {
          return Bad("STACK_GLOBAL of something not text");
        }
        return PushGlobal(module->text, name->text);
      }
      case 'q': {  // BINPUT
        ASSIGN_OR_RETURN(const uint64_t i, Unsigned(1));
        return Put(i);
      }
      case 'r': {  // LONG_BINPUT
        ASSIGN_OR_RETURN(const uint64_t i, Unsigned(4));
        return Put(i);
      }
      case 0x94:  // MEMOIZE
        return Put(memo_.size());
      case 'h': {  // BINGET
        ASSIGN_OR_RETURN(const uint64_t i, Unsigned(1));
        return Get(i);
      }
      case 'j': {  // LONG_BINGET
        ASSIGN_OR_RETURN(const uint64_t i, Unsigned(4));
        return Get(i);
      }
      case 'Q':  // BINPERSID
        return PersistentLoad();
      case 'R':
        return Reduce();
      case 'b':
        return Build();
      case 's': {  // SETITEM
        ASSIGN_OR_RETURN(ValuePtr value, Pop());
        ASSIGN_OR_RETURN(ValuePtr key, Pop());
        return SetItems({key, value});
      }
      case 'u': {  // SETITEMS
        ASSIGN_OR_RETURN(auto items, PopMark());
        return SetItems(items);
      }
      case 'a': {  // APPEND
        ASSIGN_OR_RETURN(ValuePtr value, Pop());
        return Append({value});
      }
      case 'e': {  // APPENDS
        ASSIGN_OR_RETURN(auto items, PopMark());
        return Append(items);
      }
      default:
        return Bad(absl::StrFormat(
            "pickle opcode 0x%02x, which a dictionary of tensors does not use",
            op));
    }
  }

  std::string_view in_;
  size_t pos_ = 0;
  TorchStorageLoader load_;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, ValuePtr> memo_;
  std::vector<std::weak_ptr<Value>> made_;  // every value New made
};

absl::StatusOr<std::map<std::string, at::Tensor>> ReadArchive(
    caffe2::serialize::PyTorchStreamReader& reader) {
  if (reader.hasRecord("byteorder")) {
    auto [data, size] = reader.getRecord("byteorder");
    const std::string order(static_cast<const char*>(data.get()), size);
    if (order != "little") {
      return absl::InvalidArgumentError(
          absl::StrCat("its byte order is ", order, ", not little"));
    }
  }
  if (!reader.hasRecord("data.pkl")) {
    return absl::InvalidArgumentError("it has no data.pkl");
  }
  auto [pickle, pickle_size] = reader.getRecord("data.pkl");
  if (pickle_size > kMaxTorchPickleBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("its data.pkl has ", pickle_size, " bytes, more than ",
                     kMaxTorchPickleBytes));
  }
  std::map<std::string, at::Tensor> storages;
  auto load = [&](const std::string& key, at::ScalarType dtype,
                  int64_t numel) -> absl::StatusOr<at::Tensor> {
    if (auto it = storages.find(key); it != storages.end()) return it->second;
    const std::string record = "data/" + key;
    if (!reader.hasRecord(record)) {
      return absl::InvalidArgumentError(
          absl::StrCat("storage ", key, " has no record"));
    }
    auto [data, size] = reader.getRecord(record);
    const size_t want = static_cast<size_t>(numel) * c10::elementSize(dtype);
    if (size != want) {
      return absl::InvalidArgumentError(
          absl::StrCat("storage ", key, " has ", size, " bytes for ", numel,
                       " values of ", c10::toString(dtype)));
    }
    at::Tensor t = at::empty({numel}, at::TensorOptions().dtype(dtype));
    if (size > 0) std::memcpy(t.data_ptr(), data.get(), size);
    storages[key] = t;
    return t;
  };
  return ParseTorchPickle(
      std::string_view(static_cast<const char*>(pickle.get()), pickle_size),
      load);
}

}  // namespace

absl::StatusOr<std::map<std::string, at::Tensor>> ParseTorchPickle(
    std::string_view pickle, const TorchStorageLoader& load) {
  PickleMachine machine(pickle, load);
  absl::StatusOr<ValuePtr> run;
  try {
    run = machine.Run();
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(e.what_without_backtrace());
  }
  ASSIGN_OR_RETURN(ValuePtr top, std::move(run));
  if (top->kind != Value::Kind::kDict) {
    return absl::InvalidArgumentError("it does not hold a dictionary");
  }
  std::map<std::string, at::Tensor> out;
  for (size_t i = 0; i + 1 < top->items.size(); i += 2) {
    const ValuePtr& key = top->items[i];
    const ValuePtr& value = top->items[i + 1];
    if (key->kind != Value::Kind::kText ||
        value->kind != Value::Kind::kTensor) {
      return absl::InvalidArgumentError(
          "its dictionary holds something but text -> tensor");
    }
    out[key->text] = value->tensor;
  }
  return out;
}

absl::StatusOr<std::map<std::string, at::Tensor>> ReadTorchStateDict(
    const std::string& path) {
  absl::StatusOr<std::map<std::string, at::Tensor>> out;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    out = ReadArchive(reader);
  } catch (const c10::Error& e) {
    out = absl::InvalidArgumentError(absl::StrCat(
        "it is not a zip archive torch.save writes (PyTorch >= 1.6): ",
        e.what_without_backtrace()));
  }
  if (!out.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", out.status().message()));
  }
  return out;
}

}  // namespace encoder::model

// The registry of positional schemes: every entry of schemes.h, in
// SchemeType order.
#include "server/model/positional/traits.h"

#include <string>
#include <vector>

#include "server/model/positional/schemes.h"

namespace encoder::model {
namespace {

const std::vector<const SchemeEntry*>& Entries() {
  static const std::vector<const SchemeEntry*> entries = {
      &NoneEntry(),
      &SinusoidalEntry(),
      &LearnedEntry(),
      &RopeEntry(),
      &AlibiEntry(),
      &RelativeEntry(),
      &LearnedRelativeEntry(),
      &DisentangledEntry()};
  return entries;
}

}  // namespace

const SchemeEntry& SchemeEntryOf(SchemeType type) {
  for (const SchemeEntry* e : Entries()) {
    if (e->traits.type == type) return *e;
  }
  return NoneEntry();  // unreachable: every type has an entry (tested)
}

const SchemeTraits& Traits(SchemeType type) {
  return SchemeEntryOf(type).traits;
}

const SchemeTraits* FindScheme(std::string_view name) {
  for (const SchemeEntry* e : Entries()) {
    if (e->traits.name == name) return &e->traits;
  }
  return nullptr;
}

const std::vector<const SchemeTraits*>& AllSchemes() {
  static const std::vector<const SchemeTraits*> all = [] {
    std::vector<const SchemeTraits*> out;
    for (const SchemeEntry* e : Entries()) out.push_back(&e->traits);
    return out;
  }();
  return all;
}

std::string SchemeNameList() {
  std::string out;
  for (const SchemeTraits* t : AllSchemes()) {
    if (!out.empty()) out += ", ";
    out += t->name;
  }
  return out;
}

}  // namespace encoder::model

#include "client/inputs.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

namespace encoder_client {
namespace {

std::string Trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const size_t end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

bool ParseOne(const std::string& item, int64_t* value, std::string* error) {
  if (item.empty()) {
    *error = "empty item in integer list";
    return false;
  }
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(item.c_str(), &end, 10);
  if (end != item.c_str() + item.size()) {
    *error = "'" + item + "' is not an integer";
    return false;
  }
  if (errno == ERANGE) {
    *error = "'" + item + "' is out of range";
    return false;
  }
  *value = parsed;
  return true;
}

}  // namespace

bool ParseIntList(const std::string& text, std::vector<int64_t>* values,
                  std::string* error) {
  values->clear();
  if (Trim(text).empty()) return true;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = Trim(text.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start));
    int64_t value;
    if (!ParseOne(item, &value, error)) return false;
    values->push_back(value);
    if (comma == std::string::npos) return true;
    start = comma + 1;
  }
}

bool ParseInt32List(const std::string& text, std::vector<int32_t>* values,
                    std::string* error) {
  std::vector<int64_t> wide;
  if (!ParseIntList(text, &wide, error)) return false;
  values->clear();
  for (int64_t value : wide) {
    if (value < std::numeric_limits<int32_t>::min() ||
        value > std::numeric_limits<int32_t>::max()) {
      *error = std::to_string(value) + " does not fit in int32";
      return false;
    }
    values->push_back(static_cast<int32_t>(value));
  }
  return true;
}

}  // namespace encoder_client

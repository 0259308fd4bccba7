// Parsing of command-line input values into request pieces.
#ifndef ENCODER_CLIENT_INPUTS_H_
#define ENCODER_CLIENT_INPUTS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace encoder_client {

// Parses "1,2,3" (optional spaces around items) into `values`. An empty or
// all-space string gives an empty list. Returns false and sets `error` on an
// empty item, a non-integer item, or a value out of int64 range.
bool ParseIntList(const std::string& text, std::vector<int64_t>* values,
                  std::string* error);

// Same, with each value also required to fit in int32.
bool ParseInt32List(const std::string& text, std::vector<int32_t>* values,
                    std::string* error);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_INPUTS_H_

// libFuzzer target: a tokenizer.json document loaded, then used to encode
// and decode a few fixed texts (with and without special tokens and
// truncation on either side).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/tokenizer/hf_tokenizer.h"

namespace tok = encoder::tokenizer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(
      data, data + size, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  auto tokenizer = tok::HfTokenizer::FromJson(j);
  if (!tokenizer.ok()) return 0;
  static const std::vector<std::string> texts = {
      "", " ", "Hello, world! unaffable THE  end.",
      "caf\xc3\xa9 na\xc3\xafve \xe4\xbd\xa0\xe5\xa5\xbd 123 4567",
      "\xf0\x9f\x98\x80 tab\tnew\nline  <s> [CLS] <|endoftext|>"};
  for (const std::string& text : texts) {
    for (int variant = 0; variant < 3; ++variant) {
      tok::EncodeOptions options;
      options.add_special_tokens = variant != 1;
      options.truncate = variant == 2;
      options.max_length = variant == 2 ? 4 : 0;
      options.side = tok::TruncationSide::kLeft;
      auto encoding = (*tokenizer)->Encode(text, options);
      if (!encoding.ok()) continue;
      (void)(*tokenizer)->Decode(encoding->ids, variant == 0);
    }
  }
  for (int64_t id : {int64_t{0}, int64_t{1}, (*tokenizer)->vocab_size() - 1}) {
    (void)(*tokenizer)->Label(id);
  }
  return 0;
}

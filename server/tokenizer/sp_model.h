// A thin wrapper over libsentencepiece with only standard types in its
// interface: the library's header declares absl::string_view itself, which
// clashes with Abseil's, so only sp_model.cc includes it.
#ifndef ENCODER_SERVER_TOKENIZER_SP_MODEL_H_
#define ENCODER_SERVER_TOKENIZER_SP_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace encoder::tokenizer {

class SpModel {
 public:
  struct Piece {
    int id;
    std::string piece;
    uint32_t begin;  // byte offsets into the input
    uint32_t end;
  };

  // Null with *error set when `path` is not a SentencePiece model.
  static std::unique_ptr<SpModel> Load(const std::string& path,
                                       std::string* error);
  ~SpModel();

  std::vector<Piece> Encode(const std::string& text) const;
  std::string Decode(const std::vector<int>& ids) const;
  int size() const;
  int eos_id() const;  // -1 when the model has none
  bool IsControl(int id) const;
  std::string IdToPiece(int id) const;

 private:
  SpModel();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_SP_MODEL_H_

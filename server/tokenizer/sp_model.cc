#include "server/tokenizer/sp_model.h"

#include <sentencepiece_processor.h>

namespace encoder::tokenizer {

struct SpModel::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

SpModel::SpModel() : impl_(std::make_unique<Impl>()) {}
SpModel::~SpModel() = default;

std::unique_ptr<SpModel> SpModel::Load(const std::string& path,
                                       std::string* error) {
  std::unique_ptr<SpModel> model(new SpModel());
  const auto status = model->impl_->sp.Load(path);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return model;
}

std::vector<SpModel::Piece> SpModel::Encode(const std::string& text) const {
  std::vector<Piece> out;
  const auto spt = impl_->sp.EncodeAsImmutableProto(text);
  for (const auto& p : spt.pieces()) {
    out.push_back({static_cast<int>(p.id()), p.piece(), p.begin(), p.end()});
  }
  return out;
}

std::string SpModel::Decode(const std::vector<int>& ids) const {
  return impl_->sp.DecodeIds(ids);
}

int SpModel::size() const { return impl_->sp.GetPieceSize(); }
int SpModel::eos_id() const { return impl_->sp.eos_id(); }
bool SpModel::IsControl(int id) const { return impl_->sp.IsControl(id); }
std::string SpModel::IdToPiece(int id) const { return impl_->sp.IdToPiece(id); }

}  // namespace encoder::tokenizer

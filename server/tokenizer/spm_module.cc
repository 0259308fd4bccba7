// libencoder_spm.so: the C interface of spm_module.h over libsentencepiece's
// SentencePieceProcessor. Built as a module of its own (see spm_module.h for
// why it is not linked into the server).
#include "server/tokenizer/spm_module.h"

#include <sentencepiece_processor.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

struct EncoderSpmModel {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

char* Copy(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) return nullptr;
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

void SetError(char** error, const std::string& message) {
  if (error != nullptr) *error = Copy(message);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int encoder_spm_abi_version(void) {
  return ENCODER_SPM_ABI_VERSION;
}

__attribute__((visibility("default"))) EncoderSpmModel* encoder_spm_load(
    const char* data, size_t size, char** error) {
  try {
    auto model = std::make_unique<EncoderSpmModel>();
    const auto status =
        model->processor.LoadFromSerializedProto(std::string_view(data, size));
    if (!status.ok()) {
      SetError(error, status.ToString());
      return nullptr;
    }
    if (model->processor.GetPieceSize() <= 0) {
      SetError(error, "the model has no pieces");
      return nullptr;
    }
    return model.release();
  } catch (const std::exception& e) {
    SetError(error, e.what());
  } catch (...) {
    SetError(error, "unknown error");
  }
  return nullptr;
}

__attribute__((visibility("default"))) void encoder_spm_free(
    EncoderSpmModel* model) {
  delete model;
}

__attribute__((visibility("default"))) void encoder_spm_free_string(char* s) {
  std::free(s);
}

__attribute__((visibility("default"))) int32_t encoder_spm_piece_size(
    const EncoderSpmModel* model) {
  return model->processor.GetPieceSize();
}

__attribute__((visibility("default"))) const char* encoder_spm_id_to_piece(
    const EncoderSpmModel* model, int32_t id, size_t* size) {
  const std::string& piece = model->processor.IdToPiece(id);
  *size = piece.size();
  return piece.c_str();
}

__attribute__((visibility("default"))) int32_t encoder_spm_piece_type(
    const EncoderSpmModel* model, int32_t id) {
  const auto& p = model->processor;
  if (p.IsUnknown(id)) return kEncoderSpmUnknown;
  if (p.IsControl(id)) return kEncoderSpmControl;
  if (p.IsUnused(id)) return kEncoderSpmUnused;
  if (p.IsByte(id)) return kEncoderSpmByte;
  return kEncoderSpmNormal;
}

__attribute__((visibility("default"))) int32_t encoder_spm_unk_id(
    const EncoderSpmModel* model) {
  return model->processor.unk_id();
}

__attribute__((visibility("default"))) int32_t encoder_spm_eos_id(
    const EncoderSpmModel* model) {
  return model->processor.eos_id();
}

__attribute__((visibility("default"))) int32_t encoder_spm_piece_to_id(
    const EncoderSpmModel* model, const char* piece, size_t size) {
  return model->processor.PieceToId(std::string_view(piece, size));
}

__attribute__((visibility("default"))) int encoder_spm_encode(
    const EncoderSpmModel* model, const char* text, size_t size,
    EncoderSpmPieceFn fn, void* ctx, char** error) {
  try {
    sentencepiece::ImmutableSentencePieceText spt;
    const auto status = model->processor.Encode(std::string_view(text, size),
                                                spt.mutable_proto());
    if (!status.ok()) {
      SetError(error, status.ToString());
      return -1;
    }
    for (size_t i = 0; i < spt.pieces_size(); ++i) {
      const auto piece = spt.pieces(static_cast<int>(i));
      fn(ctx, static_cast<int32_t>(piece.id()), piece.begin(), piece.end());
    }
    return 0;
  } catch (const std::exception& e) {
    SetError(error, e.what());
  } catch (...) {
    SetError(error, "unknown error");
  }
  return -1;
}

__attribute__((visibility("default"))) char* encoder_spm_decode(
    const EncoderSpmModel* model, const int32_t* ids, size_t count,
    size_t* size, char** error) {
  try {
    std::vector<int> v(ids, ids + count);
    std::string out;
    const auto status = model->processor.Decode(v, &out);
    if (!status.ok()) {
      SetError(error, status.ToString());
      return nullptr;
    }
    *size = out.size();
    char* copy = Copy(out);
    if (copy == nullptr) SetError(error, "out of memory");
    return copy;
  } catch (const std::exception& e) {
    SetError(error, e.what());
  } catch (...) {
    SetError(error, "unknown error");
  }
  return nullptr;
}

}  // extern "C"

// The C interface of libencoder_spm.so, the loadable module that wraps
// libsentencepiece. The library carries its own copy of protobuf-lite whose
// exported symbols collide with the libprotobuf the server links (linking it
// into the server aborts at start-up with a protobuf version check), so the
// server never links it: sentencepiece.cc opens this module with dlopen
// (RTLD_LOCAL | RTLD_DEEPBIND), which keeps the two copies apart. Only plain
// C types cross this boundary; no exception leaves the module.
#ifndef ENCODER_SERVER_TOKENIZER_SPM_MODULE_H_
#define ENCODER_SERVER_TOKENIZER_SPM_MODULE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Bumped whenever a signature below changes.
#define ENCODER_SPM_ABI_VERSION 1

typedef struct EncoderSpmModel EncoderSpmModel;

// Piece types, as in sentencepiece's ModelProto.
enum {
  kEncoderSpmNormal = 1,
  kEncoderSpmUnknown = 2,
  kEncoderSpmControl = 3,
  kEncoderSpmUserDefined = 4,
  kEncoderSpmUnused = 5,
  kEncoderSpmByte = 6,
};

// Called once per piece of an encoding: the piece id and its byte range
// [begin, end) in the encoded text.
typedef void (*EncoderSpmPieceFn)(void* ctx, int32_t id, uint32_t begin,
                                  uint32_t end);

int encoder_spm_abi_version(void);
// A model from the bytes of a .model file; NULL with *error set (free it
// with encoder_spm_free_string) when they are not one.
EncoderSpmModel* encoder_spm_load(const char* data, size_t size, char** error);
void encoder_spm_free(EncoderSpmModel* model);
void encoder_spm_free_string(char* s);
int32_t encoder_spm_piece_size(const EncoderSpmModel* model);
// The piece of `id` (0 <= id < piece_size), NUL-terminated, owned by the
// model; its byte length in *size.
const char* encoder_spm_id_to_piece(const EncoderSpmModel* model, int32_t id,
                                    size_t* size);
int32_t encoder_spm_piece_type(const EncoderSpmModel* model, int32_t id);
// -1 when the model has no such piece.
int32_t encoder_spm_unk_id(const EncoderSpmModel* model);
int32_t encoder_spm_eos_id(const EncoderSpmModel* model);
int32_t encoder_spm_piece_to_id(const EncoderSpmModel* model, const char* piece,
                                size_t size);
// Encodes text[0, size), calling fn for every piece in order. 0, or -1 with
// *error set.
int encoder_spm_encode(const EncoderSpmModel* model, const char* text,
                       size_t size, EncoderSpmPieceFn fn, void* ctx,
                       char** error);
// Decodes ids into a new string (free with encoder_spm_free_string), its
// byte length in *size; NULL with *error set on failure.
char* encoder_spm_decode(const EncoderSpmModel* model, const int32_t* ids,
                         size_t count, size_t* size, char** error);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ENCODER_SERVER_TOKENIZER_SPM_MODULE_H_

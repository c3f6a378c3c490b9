// The C interface of the SentencePiece shim module (libtern_spm_shim.so, built from spm_shim.cc).
//
// Why a shim: Debian 12's libsentencepiece carries its own copy of protobuf 3.14 and exports its
// symbols; loaded into a process next to the system libprotobuf 3.21 (which tern_configs needs)
// the process aborts at start-up. The shim links SentencePiece only, and vocab.cc loads it with
// dlmopen() into a link namespace of its own, so the two protobufs never meet. Only plain C types
// cross the boundary; memory the shim allocates is released by tern_spm_free (the namespace has
// its own malloc).
#pragma once

#include <stddef.h>
#include <stdint.h>

extern "C" {

// Trains a model. `options` holds "key=value" lines (SentencePiece trainer flags); `sentences`
// holds the training sentences separated by '\n'. On success returns 0 and sets *model (the
// serialized ModelProto); otherwise returns non-zero and sets *error. Free both with tern_spm_free.
typedef int (*TernSpmTrainFn)(const char* options, size_t options_len, const char* sentences,
                              size_t sentences_len, char** model, size_t* model_len, char** error);
// Loads a serialized model; returns a handle or null with *error set.
typedef void* (*TernSpmLoadFn)(const char* model, size_t model_len, char** error);
typedef void (*TernSpmUnloadFn)(void* handle);
typedef int (*TernSpmPieceSizeFn)(void* handle);
// Encodes UTF-8 text to ids; *ids is allocated by the shim. Returns 0 on success.
typedef int (*TernSpmEncodeFn)(void* handle, const char* text, size_t len, int32_t** ids,
                               size_t* num_ids, char** error);
// Decodes ids to UTF-8 text; *text is allocated by the shim. Returns 0 on success.
typedef int (*TernSpmDecodeFn)(void* handle, const int32_t* ids, size_t num_ids, char** text,
                               size_t* len, char** error);
// The piece string of one id (allocated by the shim); returns 0 on success.
typedef int (*TernSpmIdToPieceFn)(void* handle, int32_t id, char** piece, size_t* len);
typedef void (*TernSpmFreeFn)(void* p);

}  // extern "C"

// Text <-> token ids for the Translator. The real one wraps the model's SentencePiece vocabulary
// (text_codec.cc, the one file that uses data/vocab.h); tests use simple stand-ins.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tern::inference {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  // Source text -> ids, without bos/eos (the Translator appends eos).
  virtual std::vector<int32_t> Encode(std::string_view text) const = 0;
  // Output ids (no bos/eos) -> text.
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;
};

// The codec of a SentencePiece model given as serialized bytes (the vocabulary embedded in a
// .tern file).
std::unique_ptr<TextCodec> MakeVocabCodec(std::string_view serialized);

// The codec of pre-segmented text over the same vocabulary: a line is its pieces separated by
// spaces (SentencePiece's pieces hold none; they mark a word's start with U+2581), each mapped to
// its id, an unknown piece to unk; the output is its pieces joined by single spaces (pad, bos and
// eos left out). For callers that segment themselves (the Python package's lists of pieces).
std::unique_ptr<TextCodec> MakePieceCodec(std::string_view serialized);

}  // namespace tern::inference

// A TextCodec for the runtime's tests: characters to ids and back, enough to drive the Translator
// without a SentencePiece model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "inference/text_codec.h"

namespace tern::inference::testing {

class LetterCodec : public TextCodec {
 public:
  std::vector<int32_t> Encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    for (char c : text)
      if (c != ' ') ids.push_back(4 + static_cast<unsigned char>(c) % 25);
    return ids;
  }
  std::string Decode(const std::vector<int32_t>& ids) const override {
    std::string text;
    for (int32_t id : ids) text += static_cast<char>('a' + (id - 4 + 26) % 26);
    return text;
  }
};

}  // namespace tern::inference::testing

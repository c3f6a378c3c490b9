// The body of POST /v1/translate, parsed and checked: a pure function of the bytes (no server
// state), so the fuzzer and the unit tests call it directly. Every mistake is one line naming the
// field and what is wrong, for the 400 answer.
//
//   {"model": "en-de", "text": ["...", ...], "beam": 4, "n_best": 1, "scores": false}
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern::serve {

struct TranslateRequest {
  std::string model;              // empty: not given (the server's only model)
  std::vector<std::string> text;  // one sentence each, valid UTF-8
  int beam = 0;                   // 0: not given (the server's --beam)
  int n_best = 1;
  bool scores = false;
};

struct RequestLimits {
  int max_sentences = 256;  // per request
  int max_beam = 8;         // beam: 1 to this
  int default_beam = 4;     // for checking n_best when beam is not given
};

struct ParsedRequest {
  std::optional<TranslateRequest> request;
  std::string error;  // when request is empty: e.g. "text[2] is not valid UTF-8"
};

ParsedRequest ParseTranslateRequest(std::string_view body, const RequestLimits& limits);

// The first byte of `text` that is not part of a well-formed UTF-8 sequence (RFC 3629: no
// overlongs, surrogates or code points above U+10FFFF), or text.size() when all is well-formed.
size_t FirstInvalidUtf8(std::string_view text);

}  // namespace tern::serve

// tern-serve's POST /v1/translate body (launch/serve/json_request.h): any bytes give either a
// request within the limits, every sentence well-formed UTF-8, or one line naming what is wrong.
#include <string>
#include <string_view>

#include "launch/serve/json_request.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern::serve;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  if (FirstInvalidUtf8(body) > body.size()) __builtin_trap();
  RequestLimits limits;
  limits.max_sentences = 4;
  limits.max_beam = 6;
  limits.default_beam = 3;
  const ParsedRequest p = ParseTranslateRequest(body, limits);
  if (!p.request) {
    if (p.error.empty() || p.error.find('\n') != std::string::npos) __builtin_trap();
    return 0;
  }
  const TranslateRequest& r = *p.request;
  if (!p.error.empty() || r.text.empty() || r.text.size() > 4) __builtin_trap();
  if (r.beam < 0 || r.beam > limits.max_beam) __builtin_trap();
  const int beam = r.beam == 0 ? limits.default_beam : r.beam;
  if (r.n_best < 1 || r.n_best > beam) __builtin_trap();
  for (const std::string& s : r.text) {
    if (FirstInvalidUtf8(s) != s.size()) __builtin_trap();
  }
  return 0;
}

#include "common/error.h"

#include <cstdio>
#include <exception>

namespace tern {

int RunMain(const char* program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error (please report): %s\n", program, e.what());
    return 2;
  }
}

}  // namespace tern

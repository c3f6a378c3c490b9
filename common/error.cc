#include "common/error.h"

#include <cstdio>
#include <exception>

namespace tern {
namespace {

std::string& ProcessRole() {
  static std::string role;
  return role;
}

std::string Who(const char* program) {
  return ProcessRole().empty() ? program : StrCat(program, " (", ProcessRole(), ")");
}

}  // namespace

void SetProcessRole(const std::string& role) { ProcessRole() = role; }

int RunMain(const char* program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", Who(program).c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error (please report): %s\n", Who(program).c_str(),
                 e.what());
    return 2;
  }
}

}  // namespace tern

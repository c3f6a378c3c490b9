// What the harnesses share: a run that lets the program's one-line errors (tern::Error) pass and
// every other outcome (a crash, a sanitizer report, a CHECK, another exception) end the run as a
// finding; the input cut into parts; files for the readers that take paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace tern::fuzz {

// Runs f; a tern::Error is the expected answer to bad input, so it is swallowed.
template <typename F>
void ExpectOnlyErrors(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

// The input as text, cut at each NUL into at most max_parts parts (the last takes the rest).
std::vector<std::string> SplitInput(const uint8_t* data, size_t size, size_t max_parts);

// Writes bytes to a file of this process under $TMPDIR (or /tmp) and returns its path; the same
// name is rewritten by the next input.
std::string WriteScratchFile(const std::string& name, std::string_view bytes);

}  // namespace tern::fuzz

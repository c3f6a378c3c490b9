// Errors. Two kinds, kept apart on purpose:
//  - tern::Error is a user's mistake or bad data (a missing file, a malformed line, an unknown
//    config field, a peer that died). It carries one line that names the thing and says what to
//    do; programs print it and exit non-zero (see RunMain).
//  - Programmer errors go through glog's CHECK, which carries file:line.
#pragma once

#include <glog/logging.h>

#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tern {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// Throws tern::Error with the concatenated message.
template <typename... Args>
[[noreturn]] void Fail(const Args&... args) {
  throw Error(StrCat(args...));
}

// Runs a program's body: a tern::Error becomes "<program>: error: <message>" on stderr and exit
// code 1; anything else escaping is a bug and is reported as such with exit code 2.
int RunMain(const char* program, const std::function<int()>& body);

// Names this process among several in RunMain's error line, "<program> (<role>): error: ...",
// e.g. "rank 1 of 4" once an MPI job knows its rank: under mpirun every rank prints its own.
void SetProcessRole(const std::string& role);

}  // namespace tern

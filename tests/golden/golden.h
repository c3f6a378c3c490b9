// What make-golden writes and golden_test reads: the search the expected translations come from,
// and the MODEL.expected format, one line per source line:
//   TEXT <tab> SCORE <tab> NORMALIZED_SCORE <tab> GAP
// SCORE is the sum of log-probabilities, NORMALIZED_SCORE = SCORE / length^alpha, GAP how far the
// hypothesis beat the runner-up of its 4-best list in normalized score when it was made (inf when
// the beam had one hypothesis).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "inference/translator.h"

namespace tern::golden {

inline inference::TranslatorOptions GoldenTranslatorOptions() {
  inference::TranslatorOptions options;
  options.search.beam_size = 4;
  options.search.n_best = 1;
  options.search.length_alpha = 1.f;
  return options;
}

struct ExpectedLine {
  std::string text;
  float score = 0, normalized_score = 0, gap = 0;
};

// MODEL.tern -> MODEL.expected
inline std::string ExpectedPath(const std::string& model) {
  const std::string suffix = ".tern";
  CHECK(model.size() > suffix.size() && model.ends_with(suffix)) << model;
  return model.substr(0, model.size() - suffix.size()) + ".expected";
}

inline std::string FormatExpected(const std::vector<ExpectedLine>& lines) {
  std::string out;
  char numbers[128];
  for (const ExpectedLine& e : lines) {
    CHECK(e.text.find_first_of("\t\n") == std::string::npos) << e.text;
    std::snprintf(numbers, sizeof(numbers), "\t%.9g\t%.9g\t%.9g\n", e.score, e.normalized_score,
                  e.gap);
    out += e.text + numbers;
  }
  return out;
}

// tern::Error naming `what` for a malformed line.
inline std::vector<ExpectedLine> ParseExpected(const std::string& text, const std::string& what) {
  std::vector<ExpectedLine> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, '\t');) fields.push_back(cell);
    if (fields.size() != 4) {
      Fail(what, ": line ", lines.size() + 1, " has ", fields.size(),
           " tab-separated fields, not 4");
    }
    lines.push_back({fields[0], std::strtof(fields[1].c_str(), nullptr),
                     std::strtof(fields[2].c_str(), nullptr),
                     std::strtof(fields[3].c_str(), nullptr)});
  }
  return lines;
}

}  // namespace tern::golden

// tern-distill-select: turns teacher n-best lists into the target side of a distilled corpus
// (interpolated sequence-level knowledge distillation: per source line, the hypothesis with the
// best sentence-level BLEU against the reference). Several --nbest files (an ensemble of teachers)
// are pooled. The output is written atomically; statistics go to stderr.
//
//   tern-distill-select --ref train.en --nbest teacher1.nbest [--nbest teacher2.nbest]
//                       --out train.distilled.en
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file_io.h"
#include "common/logging.h"
#include "data/nbest.h"

namespace tern {
namespace {

constexpr char kUsage[] =
    "usage: tern-distill-select --ref FILE --nbest FILE [--nbest FILE ...] --out FILE\n"
    "Chooses, per line, the n-best hypothesis with the best sentence BLEU against the reference.\n"
    "  --ref FILE     the reference (the original target side), one sentence per line\n"
    "  --nbest FILE   tern-translate --n-best output for the same source; repeat to pool teachers\n"
    "  --out FILE     the distilled target side, one line per reference line (written "
    "atomically)\n";

std::vector<std::string> ReadLines(const std::string& path) {
  RefuseDirectory(path);
  std::ifstream in(path);
  if (!in) Fail(path, ": cannot open (check the path)");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

int Run(int argc, char** argv) {
  std::string ref, out;
  std::vector<std::string> nbest_files;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) Fail(flag, ": unknown option or missing value (see --help)");
    if (flag == "--ref") {
      ref = argv[++i];
    } else if (flag == "--nbest") {
      nbest_files.push_back(argv[++i]);
    } else if (flag == "--out") {
      out = argv[++i];
    } else {
      Fail("unknown option '", flag, "' (see --help)");
    }
  }
  if (ref.empty() || out.empty() || nbest_files.empty()) {
    Fail("--ref, --nbest and --out are required (see --help)");
  }
  const std::vector<std::string> references = ReadLines(ref);
  std::vector<data::NBestEntry> entries;
  for (const std::string& file : nbest_files) {
    const std::vector<std::string> lines = ReadLines(file);
    for (size_t i = 0; i < lines.size(); ++i) {
      entries.push_back(data::ParseNBestLine(lines[i], StrCat(file, ":", i + 1)));
    }
  }
  std::vector<data::DistilledChoice> choices;
  const std::vector<std::string> chosen = data::SelectByBleu(entries, references, &choices);
  std::string text;
  double chosen_bleu = 0, first_bleu = 0;
  int64_t not_first = 0, candidates = 0;
  for (size_t i = 0; i < chosen.size(); ++i) {
    text += chosen[i] + "\n";
    chosen_bleu += choices[i].chosen_bleu;
    first_bleu += choices[i].first_bleu;
    not_first += choices[i].chosen_rank != 0;
    candidates += choices[i].candidates;
  }
  WriteFileAtomic(out, text);
  const double n = std::max<double>(1, static_cast<double>(chosen.size()));
  std::fprintf(stderr,
               "tern-distill-select: %zu lines, %.1f candidates per line; mean sentence BLEU "
               "%.2f chosen vs %.2f first-best; %lld lines chose another than the first\n",
               chosen.size(), static_cast<double>(candidates) / n, chosen_bleu / n, first_bleu / n,
               static_cast<long long>(not_first));
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::InitLogging(argv[0]);
  return tern::RunMain("tern-distill-select", [&] { return tern::Run(argc, argv); });
}

// tern-score: scores hypotheses against references with sacrebleu's default BLEU and chrF.
//
//   tern-translate ... < test.es | tern-score --ref test.en [--json]
//
// Prints sacrebleu's lines ("BLEU = 12.34 45.6/18.9/9.1/4.5 (BP = ...)" and "chrF2 = 45.67"; the
// same figures as `sacrebleu REF -m bleu chrf -w 2 -f text`, without the signature), or with
// --json one line: {"bleu": 12.34, "chrf": 45.67, "precisions": [...], "bp": ..., ...}.
// Lines are split on "\n" (a trailing "\r" is dropped); both sides must have the same number of
// lines and be valid UTF-8.
#include <gflags/gflags.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file_io.h"
#include "data/metrics.h"

DEFINE_string(ref, "", "reference file, one sentence per line (UTF-8)");
DEFINE_bool(json, false, "print one JSON line instead of sacrebleu's text lines");

namespace tern {
namespace {

constexpr char kBleuSignature[] = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.3";
constexpr char kChrfSignature[] = "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.4.3";

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

int ScoreMain() {
  if (FLAGS_ref.empty()) Fail("--ref is required: the reference file, one sentence per line");
  if (!FileExists(FLAGS_ref)) Fail("reference file ", FLAGS_ref, " does not exist");
  const std::vector<std::string> refs = data::SplitScoredLines(ReadFile(FLAGS_ref), FLAGS_ref);
  RefuseDirectoryOnStdin();
  const std::string stdin_text((std::istreambuf_iterator<char>(std::cin)),
                               std::istreambuf_iterator<char>());
  const std::vector<std::string> hyps = data::SplitScoredLines(stdin_text, "stdin");
  if (hyps.size() != refs.size()) {
    Fail("stdin has ", hyps.size(), " hypothesis lines but the reference file ", FLAGS_ref, " has ",
         refs.size(), "; give one hypothesis per reference line");
  }
  if (refs.empty()) Fail("reference file ", FLAGS_ref, " is empty; there is nothing to score");

  const data::BleuScore bleu = data::CorpusBleu(hyps, refs);
  const data::ChrfScore chrf = data::CorpusChrf(hyps, refs);
  if (!FLAGS_json) {
    std::printf("%s\n%s\n", bleu.Format().c_str(), chrf.Format().c_str());
    return 0;
  }
  std::printf(
      "{\"bleu\": %.2f, \"chrf\": %.2f, \"precisions\": [%.4f, %.4f, %.4f, %.4f], \"bp\": %.4f, "
      "\"ratio\": %.4f, \"hyp_len\": %lld, \"ref_len\": %lld, \"sentences\": %zu, "
      "\"bleu_signature\": \"%s\", \"chrf_signature\": \"%s\", \"bleu_line\": \"%s\", "
      "\"chrf_line\": \"%s\"}\n",
      bleu.score, chrf.score, bleu.precisions[0], bleu.precisions[1], bleu.precisions[2],
      bleu.precisions[3], bleu.brevity_penalty, bleu.ratio, static_cast<long long>(bleu.hyp_len),
      static_cast<long long>(bleu.ref_len), refs.size(), kBleuSignature, kChrfSignature,
      JsonEscape(bleu.Format()).c_str(), JsonEscape(chrf.Format()).c_str());
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  gflags::SetUsageMessage("tern-score --ref REFERENCE [--json] < HYPOTHESES");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return tern::RunMain("tern-score", tern::ScoreMain);
}

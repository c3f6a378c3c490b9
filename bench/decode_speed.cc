// bench-decode-speed: beam search throughput of the inference runtime on a Transformer-base sized
// model with random weights (eos suppressed, so every sentence runs to the length limit and the
// work is fixed). Prints one JSON line.
//
//   bench-decode-speed [beam=4] [batch=32] [src_len=25] [threads=0 (all)] [dim=512] [vocab=8000]
//                      [aan=0 (1: the AAN decoder with FFN and gate, arch "aan")]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "common/timer.h"
#include "inference/search/beam_search.h"
#include "inference/transformer/transformer.h"
#include "tensor/threads.h"
#include "tests/inference/tiny_model.h"

int main(int argc, char** argv) {
  tern::UseTheCpusBlasKernels(argv);  // first: it may run the program again
  auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int beam = arg(1, 4), batch = arg(2, 32), src_len = arg(3, 25), threads = arg(4, 0);
  const int dim = arg(5, 512), vocab = arg(6, 8000);
  const bool aan = arg(7, 0) != 0;
  if (threads > 0) tern::SetNumThreads(threads);
  using tern::inference::testing::TinyModelSpec;
  TinyModelSpec spec{.vocab = vocab,
                     .dim = dim,
                     .heads = 8,
                     .ffn = 4 * dim,
                     .enc_depth = 6,
                     .dec_depth = 6,
                     .eos_bias = -100.f,
                     .aan = aan};
  tern::inference::testing::TinyModel model = tern::inference::testing::MakeTinyModel(spec);
  tern::inference::Transformer transformer(model.config.model(), model.weights);
  const int max_out = 2 * src_len + 10;
  tern::inference::BeamSearch search(transformer, {.beam_size = beam, .n_best = 1});
  std::vector<std::vector<int32_t>> sources(batch);
  for (int i = 0; i < batch; ++i) {
    for (int j = 0; j + 1 < src_len; ++j) sources[i].push_back(4 + (i * 31 + j * 17) % (vocab - 4));
    sources[i].push_back(tern::inference::kEosId);
  }
  search.Search({sources[0]});  // warm-up: arenas reach their size
  tern::Timer timer;
  search.Search(sources);
  const double seconds = timer.Seconds();
  std::printf(
      "{\"bench\":\"decode_speed\",\"beam\":%d,\"batch\":%d,\"src_len\":%d,\"out_len\":%d,"
      "\"dim\":%d,\"vocab\":%d,\"aan\":%d,\"threads\":%d,\"seconds\":%.3f,\"ms_per_step\":%.2f,"
      "\"out_tokens_per_s\":%.1f,\"sentences_per_s\":%.2f}\n",
      beam, batch, src_len, max_out, dim, vocab, aan ? 1 : 0, tern::NumThreads(), seconds,
      1000.0 * seconds / max_out, batch * max_out / seconds, batch / seconds);
  return 0;
}

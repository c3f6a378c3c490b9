// The .tern reader (inference/format/model_file.h), past its integrity checks: the harness gives
// each input its true size and CRC-32, so mutations reach the header, the embedded config, the
// tensor table and the weights. A file that opens is loaded as a decoder model (its config against
// its tensors) and decodes one short sentence, as tern-translate would.
#include <cstring>
#include <string>

#include "common/checksum.h"
#include "inference/format/model_file.h"
#include "inference/format/special_ids.h"
#include "inference/load_model.h"
#include "inference/search/beam_search.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.size() >= 28) {
    const uint64_t file_size = bytes.size();
    std::memcpy(bytes.data() + 16, &file_size, 8);
    const uint32_t crc = tern::Crc32(bytes.data(), bytes.size() - 4);
    std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  }
  const std::string path = tern::fuzz::WriteScratchFile("model.tern", bytes);
  tern::fuzz::ExpectOnlyErrors([&] {
    const auto file = tern::inference::ModelFile::Open(path);
    const auto model = tern::inference::LoadDecoderModel(file->config().model(), file->weights());
    tern::inference::BeamSearchOptions options;
    options.beam_size = 2;
    options.max_length_factor = 1;
    options.max_length_extra = 3;
    tern::inference::BeamSearch search(*model, options, {});
    const int32_t word = model->vocab_size() > 4 ? 4 : tern::inference::kEosId;
    search.Search({{word, tern::inference::kEosId}});
  });
  return 0;
}

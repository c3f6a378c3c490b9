// Marian .npz archives (inference/marian/npz.h) and their import (model.h): the zip directory,
// ZIP64 fields, deflate, .npy headers, then model.yml and the parameters. An input starting with
// 'Y' is model.yml text alone (its parser sits behind the members' CRCs otherwise).
#include <string>

#include "inference/marian/model.h"
#include "inference/marian/names.h"
#include "inference/marian/npz.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern::inference;
  if (size > 0 && data[0] == 'Y') {
    tern::fuzz::ExpectOnlyErrors([&] {
      int64_t vocab = 0;
      const tern::config::ModelConfig model = ModelConfigFromMarianYaml(
          std::string(reinterpret_cast<const char*>(data) + 1, size - 1), "fuzz.yml", &vocab);
      if (vocab > 0 && vocab < 100000) MarianParameters(model, vocab);
    });
    return 0;
  }
  tern::fuzz::ExpectOnlyErrors([&] {
    const NpzArchive archive("fuzz.npz", data, size);
    for (size_t i = 0; i < archive.members().size(); ++i) {
      tern::fuzz::ExpectOnlyErrors([&] { archive.Read(i); });
    }
    FromMarianNpz(archive);
  });
  return 0;
}

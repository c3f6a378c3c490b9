// Configs (configs/config_io.h): protobuf text, then --set overrides, defaults, validation and the
// model's size, as tern-train applies them. The input is the config text, a NUL, and the --set
// string ("a.b=v;c.d=w").
#include <sstream>
#include <string>

#include "configs/config_io.h"
#include "configs/model_size.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace config = tern::config;
  const std::vector<std::string> parts = tern::fuzz::SplitInput(data, size, 2);
  config::TrainConfig c;
  std::string error;
  if (!config::ParseTrainConfig(parts[0], "fuzz.pbtxt", &c, &error)) return 0;
  if (parts.size() > 1) {
    std::stringstream overrides(parts[1]);
    std::string item;
    while (std::getline(overrides, item, ';')) {
      if (!item.empty() && !config::ApplyOverride(item, &c, &error)) return 0;
    }
  }
  config::FillDefaults(&c);
  const config::TrainConfig before = c;
  if (!config::Validate(c, &error)) return 0;
  // What a valid config promises: its size is computed without overflow, and its text (what
  // checkpoints and model files keep) reads back as the same config.
  config::TrainingBytesLowerBound(c, c.data().vocab_size());
  config::TrainConfig again;
  if (!config::ParseTrainConfig(config::ToText(c), "again", &again, &error) ||
      config::ToText(again) != config::ToText(c) || !config::ChangedFields(before, again).empty()) {
    __builtin_trap();
  }
  return 0;
}

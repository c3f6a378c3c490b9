#include "tests/fuzz/fuzz_input.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace tern::fuzz {

std::vector<std::string> SplitInput(const uint8_t* data, size_t size, size_t max_parts) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && parts.size() < max_parts) {
      parts.emplace_back();
    } else {
      parts.back() += static_cast<char>(data[i]);
    }
  }
  return parts;
}

std::string WriteScratchFile(const std::string& name, std::string_view bytes) {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string d =
        std::string(tmp != nullptr ? tmp : "/tmp") + "/tern_fuzz_" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  return path;
}

}  // namespace tern::fuzz

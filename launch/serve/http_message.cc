#include "launch/serve/http_message.h"

#include <cctype>

namespace tern::serve {
namespace {

bool SameName(std::string_view lower, std::string_view any) {
  if (lower.size() != any.size()) return false;
  for (size_t i = 0; i < any.size(); ++i) {
    if (lower[i] != std::tolower(static_cast<unsigned char>(any[i]))) return false;
  }
  return true;
}

}  // namespace

const std::string* HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (SameName(key, name)) return &value;
  }
  return nullptr;
}

std::string HttpRequest::HeaderValue(std::string_view name) const {
  const std::string* value = Header(name);
  return value ? *value : std::string();
}

}  // namespace tern::serve

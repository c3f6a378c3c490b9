// The OpenAPI 3.0 document of tern-serve's HTTP API, served at GET /openapi.json.
#pragma once

#include <string>

namespace tern::serve {

// `version`: the server's; `max_beam`: the upper bound of a request's beam.
std::string OpenApiDocument(const std::string& version, int max_beam);

}  // namespace tern::serve

#include "launch/serve/openapi.h"

#include <nlohmann/json.hpp>

namespace tern::serve {
namespace {

using nlohmann::json;

json ErrorResponse(const char* description) {
  return {
      {"description", description},
      {"content", {{"application/json", {{"schema", {{"$ref", "#/components/schemas/Error"}}}}}}}};
}

json Schemas(int max_beam) {
  json text = {{"type", "array"},
               {"items", {{"type", "string"}}},
               {"minItems", 1},
               {"description", "Sentences to translate, one a string, in UTF-8."}};
  json request = {{"type", "object"},
                  {"additionalProperties", false},
                  {"required", {"text"}},
                  {"properties",
                   {{"model",
                     {{"type", "string"},
                      {"description",
                       "A name from GET /v1/models; may be left "
                       "out when the server serves one model."}}},
                    {"text", text},
                    {"beam",
                     {{"type", "integer"},
                      {"minimum", 1},
                      {"maximum", max_beam},
                      {"description", "Beam size (default: the server's --beam)."}}},
                    {"n_best",
                     {{"type", "integer"},
                      {"minimum", 1},
                      {"description", "Hypotheses returned per sentence, at most the beam."}}},
                    {"scores", {{"type", "boolean"}, {"default", false}}}}}};
  json hypothesis = {
      {"type", "object"},
      {"required", {"text"}},
      {"properties",
       {{"text", {{"type", "string"}}},
        {"score", {{"type", "number"}, {"description", "Sum of log-probabilities."}}},
        {"normalized_score", {{"type", "number"}, {"description", "score / length^alpha."}}}}}};
  json translation = hypothesis;
  translation["properties"]["n_best"] = {
      {"type", "array"},
      {"items", {{"$ref", "#/components/schemas/Hypothesis"}}},
      {"description", "With n_best > 1: every hypothesis, best first."}};
  return {{"TranslateRequest", request},
          {"Hypothesis", hypothesis},
          {"Translation", translation},
          {"TranslateResponse",
           {{"type", "object"},
            {"properties",
             {{"model", {{"type", "string"}}},
              {"translations",
               {{"type", "array"}, {"items", {{"$ref", "#/components/schemas/Translation"}}}}}}}}},
          {"Error", {{"type", "object"}, {"properties", {{"error", {{"type", "string"}}}}}}}};
}

}  // namespace

std::string OpenApiDocument(const std::string& version, int max_beam) {
  json ok_text = {{"description", "OK"}, {"content", {{"text/plain", json::object()}}}};
  json translate = {
      {"summary", "Translate sentences"},
      {"requestBody",
       {{"required", true},
        {"content",
         {{"application/json",
           {{"schema", {{"$ref", "#/components/schemas/TranslateRequest"}}}}}}}}},
      {"responses",
       {{"200",
         {{"description", "The translations, in the order of text."},
          {"content",
           {{"application/json",
             {{"schema", {{"$ref", "#/components/schemas/TranslateResponse"}}}}}}}}},
        {"400", ErrorResponse("A malformed body or field; the message names it.")},
        {"401", ErrorResponse("No or a wrong bearer token (with --api-key-file).")},
        {"404", ErrorResponse("No such model.")},
        {"413", ErrorResponse("The body, or the request's tokens, are over the server's limits.")},
        {"415", ErrorResponse("The body is not sent as Content-Type: application/json.")},
        {"429", ErrorResponse("The queue is full; Retry-After says when to try again.")},
        {"500", ErrorResponse("The model failed while decoding.")},
        {"503", ErrorResponse("Loading, or draining before shutdown.")},
        {"504", ErrorResponse("The deadline (--timeout) passed; the sentences were cancelled.")}}}};
  json doc = {
      {"openapi", "3.0.3"},
      {"info",
       {{"title", "tern-serve"},
        {"version", version},
        {"description", "Translation with exported Tern models, batched across requests."}}},
      {"components",
       {{"schemas", Schemas(max_beam)},
        {"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}}}},
      {"security", {{{"bearer", json::array()}}}},
      {"paths",
       {{"/v1/translate", {{"post", translate}}},
        {"/v1/models",
         {{"get",
           {{"summary", "The models served"}, {"responses", {{"200", {{"description", "OK"}}}}}}}}},
        {"/health",
         {{"get",
           {{"summary", "Liveness (no token needed)"},
            {"security", json::array()},
            {"responses", {{"200", {{"description", "Live"}}}}}}}}},
        {"/ready",
         {{"get",
           {{"summary", "Readiness"},
            {"responses",
             {{"200", {{"description", "Serving"}}},
              {"503", ErrorResponse("Loading or draining.")}}}}}}},
        {"/metrics",
         {{"get", {{"summary", "Prometheus text format"}, {"responses", {{"200", ok_text}}}}}}},
        {"/openapi.json",
         {{"get",
           {{"summary", "This document"}, {"responses", {{"200", {{"description", "OK"}}}}}}}}},
        {"/admin/reload",
         {{"post",
           {{"summary", "Load the model files again and swap them in"},
            {"description",
             "Needs the admin's bearer token (--admin-key-file), not the clients'; "
             "closed (403) when the server has none. "
             "Body: optional {\"model\": NAME}, else every model."},
            {"responses",
             {{"200", {{"description", "Reloaded"}}},
              {"401", ErrorResponse("No or a wrong admin token.")},
              {"403", ErrorResponse("The server has no --admin-key-file.")},
              {"409", ErrorResponse("Another reload is running; try again when it is done.")},
              {"415", ErrorResponse("A body not sent as Content-Type: application/json.")},
              {"500", ErrorResponse("A file failed to load; the old model "
                                    "keeps serving.")}}}}}}}}}};
  return doc.dump(2);
}

}  // namespace tern::serve

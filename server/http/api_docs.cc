#include "server/http/api_docs.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

namespace encoder::http {

// The embedded files: each is [begin, end) in .rodata, put there by the
// assembler's .incbin from the path CMake passes (ENCODER_*_PATH), so the
// build rereads them when they change (OBJECT_DEPENDS in CMakeLists.txt).
#define ENCODER_EMBED_FILE(symbol, path)                                      \
  extern "C" __attribute__((visibility("hidden")))                            \
  const char symbol##_begin[];                                                \
  extern "C" __attribute__((visibility("hidden"))) const char symbol##_end[]; \
  __asm__(                                                                    \
      ".pushsection .rodata\n"                                                \
      ".global " #symbol                                                      \
      "_begin\n"                                                              \
      ".hidden " #symbol                                                      \
      "_begin\n"                                                              \
      ".balign 16\n" #symbol                                                  \
      "_begin:\n"                                                             \
      ".incbin \"" path                                                       \
      "\"\n"                                                                  \
      ".global " #symbol                                                      \
      "_end\n"                                                                \
      ".hidden " #symbol "_end\n" #symbol                                     \
      "_end:\n"                                                               \
      ".byte 0\n"                                                             \
      ".popsection\n");                                                       \
  static std::string_view symbol() {                                          \
    return std::string_view(symbol##_begin, symbol##_end - symbol##_begin);   \
  }

ENCODER_EMBED_FILE(encoder_openapi_json, ENCODER_OPENAPI_JSON_PATH)
ENCODER_EMBED_FILE(encoder_swagger_ui_js, ENCODER_SWAGGER_UI_JS_PATH)
ENCODER_EMBED_FILE(encoder_swagger_ui_css, ENCODER_SWAGGER_UI_CSS_PATH)

namespace {

// Relative addresses, so the page works behind a proxy that serves the
// server under a path prefix (/encoder/docs loads /encoder/openapi.json).
constexpr char kDocsPage[] = R"(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>encoder-server HTTP API</title>
<link rel="stylesheet" href="docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({url: "openapi.json", dom_id: "#swagger-ui",
                             deepLinking: true});
</script>
</body>
</html>
)";

// The embedded files change only with the executable.
constexpr char kCacheControl[] = "public, max-age=3600";

Response Static(std::string content_type, std::string_view body) {
  Response r;
  r.content_type = std::move(content_type);
  r.body = std::string(body);
  r.headers.push_back({"Cache-Control", kCacheControl});
  return r;
}

}  // namespace

std::string_view OpenApiDocument() { return encoder_openapi_json(); }

void AddApiDocRoutes(Router& router, const std::string& version) {
  nlohmann::json document = nlohmann::json::parse(OpenApiDocument());
  document["info"]["version"] = version;
  auto text = std::make_shared<const std::string>(document.dump(2) + "\n");
  auto serve_document = [text](std::shared_ptr<Exchange> x) {
    Response r;
    r.content_type = "application/json";
    r.body = *text;
    x->Respond(std::move(r));
  };
  router.Add("GET", "/openapi.json", serve_document);
  router.Add("GET", "/api-doc/openapi.json", serve_document);
  router.Add("GET", "/docs", [](std::shared_ptr<Exchange> x) {
    x->Respond(Static("text/html; charset=utf-8", kDocsPage));
  });
  router.Add(
      "GET", "/docs/swagger-ui-bundle.js", [](std::shared_ptr<Exchange> x) {
        x->Respond(
            Static("text/javascript; charset=utf-8", encoder_swagger_ui_js()));
      });
  router.Add("GET", "/docs/swagger-ui.css", [](std::shared_ptr<Exchange> x) {
    x->Respond(Static("text/css; charset=utf-8", encoder_swagger_ui_css()));
  });
}

}  // namespace encoder::http

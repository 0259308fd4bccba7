// The HTTP API's own description, served beside it:
//
//   GET /openapi.json           the OpenAPI 3.1 document of every route
//   GET /api-doc/openapi.json   the same, at text-embeddings-inference's path
//   GET /docs                   Swagger UI rendering it
//
// The document is server/http/openapi.json and the page's scripts and
// styles are third_party/swagger-ui, all embedded in the executable at
// build time: the page works without network access. info.version is set to
// the server's version when served. These routes need no token: they
// describe the API and hold nothing of the models or the callers
// (--no-http-docs turns them off).
#ifndef ENCODER_SERVER_HTTP_API_DOCS_H_
#define ENCODER_SERVER_HTTP_API_DOCS_H_

#include <string>
#include <string_view>

#include "server/transport/http_server.h"

namespace encoder::http {

// server/http/openapi.json as committed (info.version "0.0.0").
std::string_view OpenApiDocument();

// Adds the three routes above and the page's two files
// (/docs/swagger-ui-bundle.js, /docs/swagger-ui.css) to `router`, the
// document's info.version set to `version`.
void AddApiDocRoutes(Router& router, const std::string& version);

}  // namespace encoder::http

#endif  // ENCODER_SERVER_HTTP_API_DOCS_H_

// The HTTP front's route table against its OpenAPI document
// (server/http/openapi.json, embedded): every route the front serves is an
// operation of the document and every operation is served, with and without
// the documentation routes (--no-http-docs). tests/http/openapi_test.py
// checks the live answers against the document's schemas.
#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "server/http/api_docs.h"
#include "server/http/http_front.h"

namespace encoder::http {
namespace {

using Route = std::pair<std::string, std::string>;  // {METHOD, pattern}

// The document's operations as routes: "{model}" as the router's "*".
std::set<Route> DocumentedRoutes() {
  const nlohmann::json doc = nlohmann::json::parse(OpenApiDocument());
  std::set<Route> out;
  for (const auto& [path, item] : doc.at("paths").items()) {
    std::string pattern = path;
    const size_t brace = pattern.find('{');
    if (brace != std::string::npos) pattern = pattern.substr(0, brace) + "*";
    for (const auto& [method, operation] : item.items()) {
      static const std::set<std::string> kMethods = {
          "get", "put", "post", "delete", "options", "head", "patch", "trace"};
      if (kMethods.count(method) == 0) continue;  // parameters, summary
      out.insert({absl::AsciiStrToUpper(method), pattern});
    }
  }
  return out;
}

std::set<Route> ServedRoutes(bool api_docs) {
  HttpFrontOptions options;
  options.http.listen = "127.0.0.1:0";
  options.api_docs = api_docs;
  // No request reaches the core here: only the route table is read.
  auto front = HttpFront::Start(options, /*core=*/nullptr, core::EdgeAuth{});
  EXPECT_TRUE(front.ok()) << front.status();
  if (!front.ok()) return {};
  const auto routes = (*front)->routes();
  return std::set<Route>(routes.begin(), routes.end());
}

std::string Listing(const std::set<Route>& routes) {
  return absl::StrJoin(routes, ", ", [](std::string* out, const Route& r) {
    absl::StrAppend(out, r.first, " ", r.second);
  });
}

std::set<Route> Minus(const std::set<Route>& a, const std::set<Route>& b) {
  std::set<Route> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(),
                      std::inserter(out, out.end()));
  return out;
}

const std::set<Route> kDocsRoutes = {{"GET", "/openapi.json"},
                                     {"GET", "/api-doc/openapi.json"},
                                     {"GET", "/docs"},
                                     {"GET", "/docs/swagger-ui-bundle.js"},
                                     {"GET", "/docs/swagger-ui.css"}};

TEST(ApiDocsTest, DocumentListsExactlyTheServedRoutes) {
  const std::set<Route> documented = DocumentedRoutes();
  // The page's two files are served for the page, not API operations.
  const std::set<Route> served = Minus(
      ServedRoutes(true),
      {{"GET", "/docs/swagger-ui-bundle.js"}, {"GET", "/docs/swagger-ui.css"}});
  EXPECT_GE(served.size(), 20u);
  EXPECT_EQ(Listing(Minus(served, documented)), "")
      << "served but not in server/http/openapi.json";
  EXPECT_EQ(Listing(Minus(documented, served)), "")
      << "in server/http/openapi.json but not served";
}

TEST(ApiDocsTest, NoDocsRoutesWhenTurnedOff) {
  const std::set<Route> with = ServedRoutes(true);
  const std::set<Route> without = ServedRoutes(false);
  EXPECT_EQ(Listing(Minus(with, without)), Listing(kDocsRoutes));
  EXPECT_EQ(Listing(Minus(without, with)), "");
}

TEST(ApiDocsTest, CommittedDocumentCarriesThePlaceholderVersion) {
  // The server writes its own version in when serving; a version typed
  // into the file would go stale.
  const nlohmann::json doc = nlohmann::json::parse(OpenApiDocument());
  EXPECT_EQ(doc.at("openapi").get<std::string>().substr(0, 4), "3.1.");
  EXPECT_EQ(doc.at("info").at("version"), "0.0.0");
}

}  // namespace
}  // namespace encoder::http

// text-embeddings-inference's command line and environment, in this
// server's terms: its flags under their own names (DefineTeiFlags, called
// by DefineServeFlags), what they settle after parsing (FinishTeiFlags,
// called by FinishServeFlags) and its environment variables
// (ApplyTeiEnvironment). docs/migrating-from-tei.md lists each.
#ifndef ENCODER_SERVER_APP_TEI_FLAGS_H_
#define ENCODER_SERVER_APP_TEI_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/app/serve_flags.h"

namespace encoder {

// TEI's flags that map onto this server's, those accepted without effect,
// and those refused by name, bound to flags.tei and kin.
void DefineTeiFlags(CLI::App& app, ServeFlags& f);

// Settles TEI's flags: --port (into --http-listen, which must then be
// auto), --json-output, --auto-truncate, --pooling and the default-prompt
// pair in this server's terms, and the TEI flags that are not served
// (INVALID_ARGUMENT naming them). `notes` gets a line per TEI flag accepted
// without effect.
absl::Status FinishTeiFlags(ServeFlags& f, std::vector<std::string>* notes);

// Reads text-embeddings-inference's own environment variables (PORT,
// MAX_BATCH_TOKENS, AUTO_TRUNCATE, ...: its flag names upper-cased) into
// their flags after parsing, for each flag that neither the command line
// nor its ENCODER_ variable set; the values go through the flags' own
// checks; PORT yields to --http-listen. HOSTNAME is not read: every
// container runtime sets it to the container's name. Returns a note per
// variable read, or INVALID_ARGUMENT naming the variable whose value a flag
// refuses.
absl::StatusOr<std::vector<std::string>> ApplyTeiEnvironment(CLI::App& app);

}  // namespace encoder

#endif  // ENCODER_SERVER_APP_TEI_FLAGS_H_

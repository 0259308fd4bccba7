// encoder-server's composition root: the command line parsed into one
// options struct per layer, then the metrics, the core, the bearer-token
// rule, the fronts (gRPC unless --listen=off, HTTP unless --http-listen=off),
// the models and the listener watch built in that order, and the drain on
// SIGINT/SIGTERM.
//
// Start-up: bind the fronts (health NOT_SERVING, readiness 503) -> fetch,
// load and warm every model -> health SERVING -> write the ready file.
// SIGINT/SIGTERM: health NOT_SERVING, new calls UNAVAILABLE, accepted calls
// finish (bounded by --drain-grace), exit 0. SIGHUP reloads the tokens.
#ifndef ENCODER_SERVER_APP_APP_H_
#define ENCODER_SERVER_APP_APP_H_

namespace encoder::app {

// The process: returns its exit code (0 after a drain, 1 when start-up
// fails, 2 for a bad command line).
int Main(int argc, char** argv);

}  // namespace encoder::app

#endif  // ENCODER_SERVER_APP_APP_H_

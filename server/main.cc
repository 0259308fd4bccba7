// encoder-server: everything is built and run by the composition root
// (server/app/app.h).
#include "server/app/app.h"

int main(int argc, char** argv) { return encoder::app::Main(argc, argv); }

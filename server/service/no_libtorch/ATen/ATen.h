// Stands in for LibTorch's <ATen/ATen.h> while server/service compiles: the RPC
// layer reaches the models through server/runner/served_model.h and plain
// types only, so an include that pulls LibTorch in stops the build here.
#error "server/service must not include LibTorch; use runner/served_model.h"

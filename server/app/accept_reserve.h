// Keeps the listeners alive when the process runs out of file descriptors.
//
// gRPC 1.51 (Debian bookworm's) closes a listening socket for good the
// first time accept fails with EMFILE or ENFILE, so a burst of connections
// at the descriptor limit would leave the server running but deaf. This
// file defines accept and accept4 in the executable, so that gRPC's and
// cpp-httplib's calls (through the dynamic linker, which resolves them to
// the executable first) come here. They call the C library's accept; when
// it fails for lack of descriptors, they use a descriptor held in reserve
// to take the waiting connections off the queue and close them (those
// clients see the connection reset and may retry), then report EAGAIN, on
// which the callers wait for the next connection instead of giving up. Once
// descriptors are free again, connections are accepted as before.
//
// The environment variable ENCODER_ACCEPT_RESERVE=off turns the reserve off
// (accept's errors reach the callers as they are): for testing the
// listener watch (listener_watch.h) against gRPC's own behaviour.
#ifndef ENCODER_SERVER_APP_ACCEPT_RESERVE_H_
#define ENCODER_SERVER_APP_ACCEPT_RESERVE_H_

#include <cstdint>

namespace encoder {

// Opens the reserve descriptor; call once at start, before listening.
// Returns false if even that fails.
bool OpenAcceptReserve();

// Connections closed unaccepted for lack of descriptors since start.
int64_t ConnectionsShedForDescriptors();

// Times an accept failed for lack of descriptors since start (with the
// reserve on or off).
int64_t AcceptExhaustionEvents();

// Calls of accept/accept4 on `listener_fd` since start, whatever their
// result (0 for descriptors of 4096 and above, which are not counted).
uint64_t AcceptCallsOn(int listener_fd);

}  // namespace encoder

#endif  // ENCODER_SERVER_APP_ACCEPT_RESERVE_H_

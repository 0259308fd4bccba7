// Names the calling thread, as `top -H`, `perf`, gdb and
// /proc/<pid>/task/<tid>/comm show it, so that a profile of the server
// says which of its threads is busy. Linux keeps 15 bytes of a name;
// longer ones are cut there.
#ifndef ENCODER_SERVER_COMMON_THREAD_NAME_H_
#define ENCODER_SERVER_COMMON_THREAD_NAME_H_

#include <pthread.h>

#include <string>

namespace encoder {

inline void NameThisThread(const std::string& name) {
#ifdef __linux__
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
#else
  (void)name;
#endif
}

}  // namespace encoder

#endif  // ENCODER_SERVER_COMMON_THREAD_NAME_H_

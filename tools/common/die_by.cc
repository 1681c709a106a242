#include "common/die_by.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

namespace kvlane_tools {

void DieBy(int sig) {
  std::fflush(nullptr);
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(sig, &default_action, nullptr);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  raise(sig);
  _exit(128 + sig);
}

}  // namespace kvlane_tools

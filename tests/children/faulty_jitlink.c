/* faulty_jitlink: a libnvJitLink.so.13 that misbehaves as it is loaded, for the test of
 * the child supervisor (src/child.rs) through the finalizer's child process: a real
 * library that spins or floods its output cannot be had on demand. With
 * NVLINKRS_TEST_FAULT=spin it spins for ever in its constructor; with
 * NVLINKRS_TEST_FAULT=flood it first writes 1 GiB to its stdout (the child's answer
 * pipe). Without the variable it does nothing (and exports nothing a finalizer needs).
 *
 * Build: cc -shared -fPIC -o libnvJitLink.so.13 faulty_jitlink.c
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void misbehave(void) {
  const char *fault = getenv("NVLINKRS_TEST_FAULT");
  if (!fault) return;
  if (!strcmp(fault, "flood")) {
    static char zeros[1 << 20];
    for (int i = 0; i < 1024; i++)
      if (write(1, zeros, sizeof zeros) < 0) break;
  }
  for (volatile unsigned long x = 0;; x++) {
  }
}

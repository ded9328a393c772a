/* sigtest: a host that handles SIGSEGV itself, as a JVM does (its null checks and GC
   barriers fault on purpose and recover in their own handler), linking through
   libnvJitLink at the same time.

   A thread installs a SA_SIGINFO handler for SIGSEGV, then faults on a PROT_NONE page
   about every millisecond; the handler makes the page readable again, so the read is
   retried and succeeds. Meanwhile main runs LINKS -lto links of the LTO IR files named on
   the command line:  sigtest sm_90 LINKS a.ltoir b.ltoir ...
   Prints "links N ok" and "faults recovered" (or "lost"); exit status 0 when every link succeeded
   and the host's own faults were all recovered. */
#include <nvJitLink.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static char *page;
static long page_size;
static atomic_long recovered;
static atomic_int stop, ready;

static void on_segv(int sig, siginfo_t *info, void *ctx) {
  (void)sig, (void)ctx;
  char *at = (char *)info->si_addr;
  if (at >= page && at < page + page_size) {
    mprotect(page, page_size, PROT_READ);
    atomic_fetch_add(&recovered, 1);
    return;
  }
  /* not ours: as a JVM would, die loudly */
  signal(SIGSEGV, SIG_DFL);
}

static void *faulter(void *arg) {
  (void)arg;
  struct sigaction sa = {0};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
  atomic_store(&ready, 1);
  long faults = 0;
  while (!atomic_load(&stop)) {
    mprotect(page, page_size, PROT_NONE);
    volatile char c = *(volatile char *)page; /* faults, recovered by on_segv */
    (void)c;
    faults++;
    usleep(1000);
  }
  return (void *)faults;
}

static int one_link(const char *arch, int files, char **paths) {
  const char *opts[] = {arch, "-lto"};
  nvJitLinkHandle h;
  if (nvJitLinkCreate(&h, 2, opts) != NVJITLINK_SUCCESS) return 1;
  int failed = 0;
  for (int i = 0; i < files; i++)
    if (nvJitLinkAddFile(h, NVJITLINK_INPUT_LTOIR, paths[i]) != NVJITLINK_SUCCESS) failed = 1;
  if (!failed && nvJitLinkComplete(h) != NVJITLINK_SUCCESS) failed = 1;
  size_t size = 0;
  if (!failed && (nvJitLinkGetLinkedCubinSize(h, &size) != NVJITLINK_SUCCESS || size == 0))
    failed = 1;
  nvJitLinkDestroy(&h);
  return failed;
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  char arch[64];
  snprintf(arch, sizeof arch, "-arch=%s", argv[1]);
  int links = atoi(argv[2]);
  page_size = sysconf(_SC_PAGESIZE);
  page = mmap(NULL, page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  pthread_t t;
  pthread_create(&t, NULL, faulter, NULL);
  while (!atomic_load(&ready)) usleep(100);
  int ok = 0;
  for (int i = 0; i < links; i++) ok += one_link(arch, argc - 3, argv + 3) == 0;
  atomic_store(&stop, 1);
  void *faults;
  pthread_join(t, &faults);
  printf("links %d ok\nfaults %s\n", ok,
         (long)faults == atomic_load(&recovered) && (long)faults > 0 ? "recovered" : "lost");
  return ok == links && (long)faults == atomic_load(&recovered) ? 0 : 1;
}

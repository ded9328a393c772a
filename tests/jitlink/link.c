/* A program built against nvJitLink.h (13.5): its calls go to the header's versioned
   names (__nvJitLink*_13_5@libnvJitLink.so.13). Links the files named on its command
   line as LTO IR (-lto) for the architecture given first, and writes the image to the
   path given second:  link sm_90 OUT.cubin a.ltoir b.ltoir
   Prints each call's result and the logs; exit status 0 when the link succeeded. */
#include <nvJitLink.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                       \
  do {                                                                    \
    nvJitLinkResult r_ = (call);                                          \
    printf("%s = %d\n", #call, (int)r_);                                  \
    if (r_ != NVJITLINK_SUCCESS) failed = 1;                              \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  char arch[64];
  snprintf(arch, sizeof arch, "-arch=%s", argv[1]);
  const char *opts[] = {arch, "-lto"};
  nvJitLinkHandle h;
  int failed = 0;
  unsigned major = 0, minor = 0;
  CHECK(nvJitLinkVersion(&major, &minor));
  printf("version %u.%u\n", major, minor);
  CHECK(nvJitLinkCreate(&h, 2, opts));
  for (int i = 3; i < argc; i++) CHECK(nvJitLinkAddFile(h, NVJITLINK_INPUT_LTOIR, argv[i]));
  CHECK(nvJitLinkComplete(h));
  size_t size = 0;
  CHECK(nvJitLinkGetErrorLogSize(h, &size));
  if (size > 0) {
    char *log = malloc(size);
    nvJitLinkGetErrorLog(h, log);
    printf("error log: %s", log);
    free(log);
  }
  if (nvJitLinkGetLinkedCubinSize(h, &size) == NVJITLINK_SUCCESS) {
    char *cubin = malloc(size);
    CHECK(nvJitLinkGetLinkedCubin(h, cubin));
    FILE *f = fopen(argv[2], "wb");
    fwrite(cubin, 1, size, f);
    fclose(f);
    printf("cubin %zu bytes\n", size);
    free(cubin);
  }
  CHECK(nvJitLinkDestroy(&h));
  return failed;
}

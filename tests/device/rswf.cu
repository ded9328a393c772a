// rswf.cu, rswg.cu, rswk.cu: two units of switch functions and one of kernels calling them,
// linked in two steps (`-r` of each, then a final link): nvlink's `-r` drops the functions'
// bank-2 relocations, so its final image reads the wrong jump table (docs/rules/
// differences.md); nvlinkrs's keeps them. cuload.cu runs the image.
#include "rsw.h"
RSW(f, 3)

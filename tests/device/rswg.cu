// rswg.cu: the second switch function (see rswf.cu)
#include "rsw.h"
RSW(g, 5)

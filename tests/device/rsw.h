// rsw.h: the switch functions of rswf.cu and rswg.cu (one jump table each in constant bank
// 2), for the device units and for cuload.cu's host check alike.
#define RSW(name, k)                                                                       \
    __host__ __device__ __noinline__ int name(int x, int y)                                \
    {                                                                                      \
        switch (x) {                                                                       \
        case 0: return y + k;     case 1: return y * 9;  case 2: return y ^ 0x77;          \
        case 3: return y - k;     case 4: return y << 5; case 5: return y >> 4;            \
        case 6: return y * y * k; case 7: return ~y + 1; default: return -k;               \
        }                                                                                  \
    }

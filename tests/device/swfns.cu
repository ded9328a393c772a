// swfns.cu: device functions whose dense `switch` ptxas turns into a jump table in constant
// bank 2 (`.nv.constant2.<function>`), which the linker must append to the bank of every
// kernel that calls them and relocate (issue 35: wrong code with exit 0 before). op_b holds
// 64-bit constants; op_c calls op_a.
#include "sw.h"
__host__ __device__ __noinline__ int op_a(int x, const int *p)
{
    switch (x) {
    case 0: return p[3] * 7;   case 1: return p[1] + 11;  case 2: return p[2] ^ 13;
    case 3: return p[5] - 17;  case 4: return p[7] * 19;  case 5: return p[0] + 23;
    case 6: return p[4] ^ 29;  case 7: return p[6] - 31;  case 8: return p[9] * 37;
    case 9: return p[8] + 41;  case 10: return p[11] ^ 43; case 11: return p[10] - 47;
    default: return -1;
    }
}
__host__ __device__ __noinline__ double op_b(int x, const double *q)
{
    switch (x) {
    case 0: return q[1] * 1.2345678901234567;  case 1: return q[2] + 3.0;
    case 2: return q[3] - 5.0;  case 3: return q[4] * 7.0;  case 4: return q[5] + 9.0;
    case 5: return q[6] - 11.0; case 6: return q[7] * 13.0; case 7: return q[8] + 15.0;
    case 8: return q[9] - 17.0; case 9: return q[10] * 19.0; case 10: return q[11] + 21.0;
    case 11: return q[12] - 23.0; case 12: return q[13] * 25.0; case 13: return q[14] + 27.0;
    default: return 0.5;
    }
}
__host__ __device__ __noinline__ int op_c(int x, const int *p)
{
    switch (x & 15) {
    case 0: return op_a(x >> 4, p) + 2;  case 1: return p[12] * 3;  case 2: return p[13] + 5;
    case 3: return p[14] ^ 7;  case 4: return p[15] - 9;  case 5: return p[16] * 11;
    case 6: return p[17] + 13; case 7: return p[18] ^ 15; case 8: return p[19] - 17;
    case 9: return p[20] * 19; case 10: return p[21] + 21; case 11: return p[22] ^ 23;
    default: return op_a(x, p);
    }
}

/* Minimal <stdint.h> for parsing include/deepspeed_c.h with pycparser. */
#ifndef JL_GEN_FAKE_STDINT_H
#define JL_GEN_FAKE_STDINT_H
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#endif

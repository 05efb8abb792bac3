/* Minimal <stddef.h> for parsing include/deepspeed_c.h with pycparser (it
 * cannot read the compiler's own headers). Only names matter here: the
 * generator maps typedef names, not their definitions, to Julia types. */
#ifndef JL_GEN_FAKE_STDDEF_H
#define JL_GEN_FAKE_STDDEF_H
typedef unsigned long size_t;
#define NULL ((void*)0)
#endif

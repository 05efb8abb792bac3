/* Compiles the public header alone (as C99, C11, C++11, C++17) with every
 * warning an error. Nothing else may be needed to include it. */
#include "deepspeed_c.h"

#if DS_VERSION_NUMBER != (DS_VERSION_MAJOR * 1000000 + DS_VERSION_MINOR * 1000 + DS_VERSION_PATCH)
#error "DS_VERSION_NUMBER is inconsistent"
#endif

typedef int ds_header_only_check_t; /* a translation unit must not be empty */

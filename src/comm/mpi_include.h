// <mpi.h> through the C API only: Open MPI's and MPICH's C++ bindings need
// their own library. Include this instead of <mpi.h> (only where
// DS_WITH_MPI is defined).
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

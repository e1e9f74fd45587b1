/*
 * Debian's libopenmpi-dev ships ompi/op/op.h but not this header, which op.h
 * includes for one macro used by its Fortran user-op path. That path never
 * runs in coll/dualrail (user-defined ops go to the previous module), so a
 * plain conversion is all that is needed. Only on the include path after
 * Open MPI's own headers: a full installation's header wins.
 */
#ifndef DUALRAIL_COMPAT_FINT_2_INT_H
#define DUALRAIL_COMPAT_FINT_2_INT_H

#ifndef OMPI_INT_2_FINT
#define OMPI_INT_2_FINT(a) ((MPI_Fint)(a))
#endif

#endif

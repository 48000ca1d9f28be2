/* cdp's public API: everything a program needs to define a model, train
 * it with Cyclic Data Parallelism over MPI and read its weights.
 *
 *   cdp/shape.h     the shape of one sample
 *   cdp/model.h     a built model: its stages, tensors, initialisation
 *   cdp/builder.h   defining a model of one's own, layer by layer
 *   cdp/weights.h   weight files (safetensors)
 *   cdp/train.h     training: a job described by cdp_run's options
 *
 * Build against the installed library with
 *   mpicc prog.c $(pkg-config --cflags --libs cdp)
 * examples/custom_model.c is a complete program.  doc/reference.md ("The C
 * API") says what is public and how stable it is. */
#ifndef CDP_PUBLIC_CDP_H
#define CDP_PUBLIC_CDP_H

#include "cdp/model.h"
#include "cdp/builder.h"
#include "cdp/weights.h"
#include "cdp/train.h"

#endif

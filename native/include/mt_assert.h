/* MT_ASSERT(cond, msg): an invariant. In a build with MT_DEBUG_ASSERTS it prints where, the
 * condition and msg to stderr and aborts; otherwise it compiles to nothing (cond is not run). */
#ifndef MT_ASSERT_H
#define MT_ASSERT_H
#ifdef MT_DEBUG_ASSERTS
#include <stdio.h>
#include <stdlib.h>
#define MT_ASSERT(cond, msg)                                                                          \
  do {                                                                                                \
    if (!(cond)) {                                                                                    \
      fprintf(stderr, "moetier: invariant failed at %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond, msg); \
      abort();                                                                                        \
    }                                                                                                 \
  } while (0)
#else
#define MT_ASSERT(cond, msg) \
  do {                       \
  } while (0)
#endif
#endif

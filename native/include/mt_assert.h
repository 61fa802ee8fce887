/*
 * Native invariants: MT_ASSERT(cond, msg) states something that holds unless the native code
 * has a bug (a slot completed twice, a lease count below zero, a chunk claimed past the end).
 * It is not for checking arguments or operating errors: those return a status and a message
 * (mt_backend.h), and the addon turns them into typed JavaScript errors.
 *
 *   built with MT_DEBUG_ASSERTS (cmake -DMT_DEBUG_ASSERTS=ON; npm run build:native:debug
 *   builds it into native/build-debug, and npm test runs the backend, pool and tier tests
 *   on it): a false cond prints "file:line: assertion failed: cond: msg" to stderr and
 *   calls abort(), so a broken invariant stops loudly where it broke
 *   otherwise: nothing; cond is not evaluated (it sits in sizeof, an unevaluated operand,
 *   so it still has to compile and the names it reads count as used)
 *
 * msg is a string literal that says what the invariant protects.
 */
#ifndef MT_ASSERT_H
#define MT_ASSERT_H

#ifdef MT_DEBUG_ASSERTS
#include <stdio.h>
#include <stdlib.h>
#define MT_ASSERT(cond, msg)                                                                \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      fprintf(stderr, "%s:%d: assertion failed: %s: %s\n", __FILE__, __LINE__, #cond, msg); \
      fflush(stderr);                                                                       \
      abort();                                                                              \
    }                                                                                       \
  } while (0)
#define MT_DEBUG_ASSERTS_ENABLED 1
#else
#define MT_ASSERT(cond, msg) ((void)sizeof(!(cond)), (void)sizeof(msg))
#define MT_DEBUG_ASSERTS_ENABLED 0
#endif

#endif /* MT_ASSERT_H */

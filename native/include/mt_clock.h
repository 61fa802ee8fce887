/* The native code's one clock: CLOCK_MONOTONIC in ns, the clock of Node's process.hrtime.bigint(),
 * so native stamps (layer timing, upload events) and JavaScript's share a timeline. */
#ifndef MT_CLOCK_H
#define MT_CLOCK_H
#include <stdint.h>
#include <time.h>

static inline int64_t mt_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif

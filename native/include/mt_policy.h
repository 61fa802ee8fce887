/*
 * moetier eviction policy: decayed LFU (dlfu), the one implementation of the choice the tier
 * makes when a slot is needed (native/tier: an admitted miss, a prefetch, a kept miss on a host
 * tier) and that `moetier replay --policy dlfu` makes offline (src/tiers/policies/dlfu.ts, through
 * the addon). Pure functions over one layer's rows, which the caller owns:
 *
 *   count[e]  the expert's decayed routing count as of stamp[e] (0: never routed)
 *   stamp[e]  the decode token of its last update
 *
 *   add       count = count x 2^(-(now - stamp) / H) + add, stamp = now   (a routing: add = its rows)
 *   score     log2(count) + stamp / H, -infinity when never routed: compared at one time, its order is
 *             that of the decayed counts (no decay pass over every expert, no underflow)
 *   victim    among eligible[e] != 0, the lowest score; ties the lowest id; -1 when none is eligible
 *
 * H is the half-life in decode tokens (1 .. 2^20).
 */
#ifndef MT_POLICY_H
#define MT_POLICY_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

#define MT_DLFU_HALF_LIFE_MAX 1048576.0

void mt_dlfu_add(double* count, double* stamp, int32_t expert, double add, double now, double half_life);
double mt_dlfu_score(const double* count, const double* stamp, int32_t expert, double half_life);
int32_t mt_dlfu_victim(const double* count, const double* stamp, const uint8_t* eligible, int32_t n_expert,
                       double half_life);

#ifdef __cplusplus
}
#endif
#endif

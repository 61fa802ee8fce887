// Decayed LFU (include/mt_policy.h): the tier's eviction at need and the replay's dlfu policy.
#include <cmath>
#include <limits>
#include "mt_policy.h"

extern "C" void mt_dlfu_add(double* count, double* stamp, int32_t expert, double add, double now, double half_life) {
  count[expert] = count[expert] * std::exp2(-(now - stamp[expert]) / half_life) + add;
  stamp[expert] = now;
}

extern "C" double mt_dlfu_score(const double* count, const double* stamp, int32_t expert, double half_life) {
  const double c = count[expert];
  return c > 0 ? std::log2(c) + stamp[expert] / half_life : -std::numeric_limits<double>::infinity();
}

extern "C" int32_t mt_dlfu_victim(const double* count, const double* stamp, const uint8_t* eligible, int32_t n_expert,
                                  double half_life) {
  int32_t best = -1;
  double best_score = std::numeric_limits<double>::infinity();
  for (int32_t e = 0; e < n_expert; e++) {
    if (eligible[e] == 0) continue;
    const double s = mt_dlfu_score(count, stamp, e, half_life);
    // Strictly lower: ties go to the lowest id; the first eligible is taken even at -infinity.
    if (best < 0 || s < best_score) best = e, best_score = s;
  }
  return best;
}

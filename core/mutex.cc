#include "core/mutex.h"

namespace hmc {

void SkipMutexCycleDetectionInReleaseBuilds() {
#ifdef NDEBUG
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
}

}  // namespace hmc

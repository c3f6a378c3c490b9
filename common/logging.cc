#include "common/logging.h"

#include <glog/logging.h>

namespace tern {

void InitLogging(const char* argv0) {
  static bool initialized = false;
  if (initialized) return;
  initialized = true;
  FLAGS_logtostderr = true;
  FLAGS_colorlogtostderr = false;
  google::InitGoogleLogging(argv0);
}

}  // namespace tern

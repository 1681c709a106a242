// Status for kvbench's device code (device_memory.cc, device_check.cc): a CUDA
// runtime result as a Status, and the answer of every device call in a build
// without CUDA.
#pragma once

#include <string>

#include "kvlane/status.h"

#ifdef KVBENCH_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace kvbench {

#ifdef KVBENCH_HAVE_CUDA
// Ok for cudaSuccess, else Backend "<what>: <CUDA error string>".
inline kvlane::Status CudaStatus(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return kvlane::Status::Ok();
  return kvlane::Status::Backend(std::string(what) + ": " + cudaGetErrorString(rc));
}
#endif

inline kvlane::Status NoCuda() {
  return kvlane::Status::NotSupported("kvbench was built without CUDA");
}

}  // namespace kvbench

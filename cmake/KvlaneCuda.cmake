# kvlane_cuda_defaults(TARGET): what every target with device code needs here.
# Device code is C++17 (the CMake of Debian 12 knows no C++20 flags for nvcc);
# static cudart loads the driver at run time, so binaries still start (and every
# CPU transport works) on a machine without a GPU or driver. The architecture
# is CMAKE_CUDA_ARCHITECTURES (sm_90a unless the build chose another: see the
# top-level CMakeLists.txt).
function(kvlane_cuda_defaults target)
  set_target_properties(${target} PROPERTIES CUDA_RUNTIME_LIBRARY Static CUDA_STANDARD 17
                                             CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)
endfunction()

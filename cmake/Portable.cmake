# AIR_PORTABLE: one air-run binary for the images people train in: the static
# runtime of cmake/StaticRuntime.cmake with every piece required (libyaml's
# archive too), so that the binary needs only glibc and, at run time, NVML.
# It needs the glibc it was built against or newer: scripts/build-portable.sh
# builds it in a Debian 11 root, for glibc 2.31.
set(AIR_STATIC_RUNTIME_REQUIRED ON)
include(${CMAKE_CURRENT_LIST_DIR}/StaticRuntime.cmake)

# The C++ runtime and libraries linked into the binary rather than loaded at
# every start: libstdc++ and libgcc statically, fmt header-only (Debian ships
# no libfmt.a), yaml-cpp and libyaml from their static archives. What stays
# dynamic is glibc (libc, libm) and NVML, which air-run loads at run time when
# a driver is there.
#
# Why: air-run is started once per launch, and a launch is milliseconds. The
# loader's work for libstdc++, fmt and yaml-cpp (finding them, relocating,
# running libstdc++'s start-up) was a large part of it: `air-run --version`
# took 6.7 to 8.1 ms dynamic and 4.6 to 5.9 ms static on the 2-core VM; on an
# H100 host an 8-rank launch took 5.8 ms against 7.4 ms (docs/benchmarks.md,
# "The containment floor").
#
# AIR_PORTABLE (cmake/Portable.cmake) needs every archive and stops without
# one. AIR_STATIC_RUNTIME (the default for builds without sanitizers) takes
# what it finds: libyaml may stay dynamic (a C library: no second libstdc++
# comes with it); without yaml-cpp's archive or fmt's headers the build stays
# dynamic, since a dynamic yaml-cpp brings libstdc++.so along and a second,
# static copy beside it would split the runtime in two. Sanitizer builds stay
# dynamic: ASan's operator new must not be shadowed by a static libstdc++'s.
#
# Sets AIR_STATIC_RUNTIME_ACTIVE and AIR_STATIC_LINK_OPTIONS, and when active
# defines the targets the rest of the build links under their usual names:
# fmt::fmt, the yaml-cpp target named by AIR_YAML_TARGET and (when static) the
# libyaml one named by AIR_LIBYAML_TARGET. AIR_STATIC_RUNTIME_REQUIRED (AIR_PORTABLE) makes a
# missing piece an error.

set(AIR_STATIC_RUNTIME_ACTIVE OFF)
find_path(AIR_FMT_INCLUDE_DIR fmt/format.h DOC "fmt headers, used header-only")
find_path(AIR_YAML_CPP_INCLUDE_DIR yaml-cpp/yaml.h DOC "yaml-cpp headers")
find_library(AIR_YAML_CPP_STATIC NAMES libyaml-cpp.a DOC "yaml-cpp static archive")
find_path(AIR_LIBYAML_INCLUDE_DIR yaml.h DOC "libyaml headers")
find_library(AIR_LIBYAML_STATIC NAMES libyaml.a DOC "libyaml static archive")

if(NOT AIR_FMT_INCLUDE_DIR OR NOT AIR_YAML_CPP_INCLUDE_DIR OR NOT AIR_YAML_CPP_STATIC)
  if(AIR_STATIC_RUNTIME_REQUIRED)
    message(FATAL_ERROR "AIR_PORTABLE needs fmt's headers (libfmt-dev) and yaml-cpp's static archive "
                        "(libyaml-cpp-dev): found fmt '${AIR_FMT_INCLUDE_DIR}', yaml-cpp "
                        "'${AIR_YAML_CPP_INCLUDE_DIR}', '${AIR_YAML_CPP_STATIC}'")
  endif()
  message(STATUS "static runtime: no yaml-cpp archive or fmt headers; fmt, yaml-cpp and libstdc++ load at start")
  return()
endif()
if(AIR_STATIC_RUNTIME_REQUIRED AND (NOT AIR_LIBYAML_INCLUDE_DIR OR NOT AIR_LIBYAML_STATIC))
  message(FATAL_ERROR "AIR_PORTABLE needs libyaml's static archive (libyaml-dev): found "
                      "'${AIR_LIBYAML_INCLUDE_DIR}', '${AIR_LIBYAML_STATIC}'")
endif()

add_library(fmt::fmt INTERFACE IMPORTED)
set_target_properties(fmt::fmt PROPERTIES
  INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1
  INTERFACE_INCLUDE_DIRECTORIES "${AIR_FMT_INCLUDE_DIR}")

add_library(air_yaml_cpp_static STATIC IMPORTED)
set_target_properties(air_yaml_cpp_static PROPERTIES
  IMPORTED_LOCATION "${AIR_YAML_CPP_STATIC}"
  INTERFACE_INCLUDE_DIRECTORIES "${AIR_YAML_CPP_INCLUDE_DIR}")
set(AIR_YAML_TARGET air_yaml_cpp_static)

if(AIR_LIBYAML_INCLUDE_DIR AND AIR_LIBYAML_STATIC)
  add_library(air_libyaml_static STATIC IMPORTED)
  set_target_properties(air_libyaml_static PROPERTIES
    IMPORTED_LOCATION "${AIR_LIBYAML_STATIC}"
    INTERFACE_INCLUDE_DIRECTORIES "${AIR_LIBYAML_INCLUDE_DIR}")
  set(AIR_LIBYAML_TARGET air_libyaml_static)
endif()

# For air-run alone (cli/CMakeLists.txt): the tests link Catch2, and
# air-nccl-check NCCL, which may bring libstdc++.so along.
set(AIR_STATIC_LINK_OPTIONS -static-libstdc++ -static-libgcc)
set(AIR_STATIC_RUNTIME_ACTIVE ON)
message(STATUS "static runtime: fmt header-only (${AIR_FMT_INCLUDE_DIR}), yaml-cpp ${AIR_YAML_CPP_STATIC}, "
               "libyaml ${AIR_LIBYAML_STATIC}, static libstdc++")

# AIR_PORTABLE: one air-run binary for the images people train in. fmt is
# compiled in (header-only: Debian ships no libfmt.a), yaml-cpp comes from its
# static archive, libstdc++ and libgcc are linked statically. What stays
# dynamic is glibc (libc, libm) and NVML, which air-run loads at run time when
# a driver is there. The binary needs the glibc it was built against or newer:
# scripts/build-portable.sh builds it in a Debian 11 root, for glibc 2.31.
#
# Defines the targets the rest of the build links, under their usual names:
# fmt::fmt and the yaml-cpp target named by AIR_YAML_TARGET.

find_path(AIR_FMT_INCLUDE_DIR fmt/format.h DOC "fmt headers, used header-only")
find_path(AIR_YAML_CPP_INCLUDE_DIR yaml-cpp/yaml.h DOC "yaml-cpp headers")
find_library(AIR_YAML_CPP_STATIC NAMES libyaml-cpp.a DOC "yaml-cpp static archive")
if(NOT AIR_FMT_INCLUDE_DIR OR NOT AIR_YAML_CPP_INCLUDE_DIR OR NOT AIR_YAML_CPP_STATIC)
  message(FATAL_ERROR "AIR_PORTABLE needs fmt's headers (libfmt-dev) and yaml-cpp's static archive "
                      "(libyaml-cpp-dev): found fmt '${AIR_FMT_INCLUDE_DIR}', yaml-cpp "
                      "'${AIR_YAML_CPP_INCLUDE_DIR}', '${AIR_YAML_CPP_STATIC}'")
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

add_link_options(-static-libstdc++ -static-libgcc)
message(STATUS "AIR_PORTABLE: fmt header-only (${AIR_FMT_INCLUDE_DIR}), yaml-cpp ${AIR_YAML_CPP_STATIC}, "
               "static libstdc++")

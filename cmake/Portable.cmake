# AIR_PORTABLE: one air-run binary for the images people train in. fmt is
# compiled in (header-only: Debian ships no libfmt.a), yaml-cpp and libyaml come
# from their static archives, libstdc++ and libgcc are linked statically. What stays
# dynamic is glibc (libc, libm) and NVML, which air-run loads at run time when
# a driver is there. The binary needs the glibc it was built against or newer:
# scripts/build-portable.sh builds it in a Debian 11 root, for glibc 2.31.
#
# Defines the targets the rest of the build links, under their usual names:
# fmt::fmt, the yaml-cpp target named by AIR_YAML_TARGET and the libyaml one
# named by AIR_LIBYAML_TARGET.

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

find_path(AIR_LIBYAML_INCLUDE_DIR yaml.h DOC "libyaml headers")
find_library(AIR_LIBYAML_STATIC NAMES libyaml.a DOC "libyaml static archive")
if(NOT AIR_LIBYAML_INCLUDE_DIR OR NOT AIR_LIBYAML_STATIC)
  message(FATAL_ERROR "AIR_PORTABLE needs libyaml's static archive (libyaml-dev): found "
                      "'${AIR_LIBYAML_INCLUDE_DIR}', '${AIR_LIBYAML_STATIC}'")
endif()
add_library(air_libyaml_static STATIC IMPORTED)
set_target_properties(air_libyaml_static PROPERTIES
  IMPORTED_LOCATION "${AIR_LIBYAML_STATIC}"
  INTERFACE_INCLUDE_DIRECTORIES "${AIR_LIBYAML_INCLUDE_DIR}")
set(AIR_LIBYAML_TARGET air_libyaml_static)

add_link_options(-static-libstdc++ -static-libgcc)
message(STATUS "AIR_PORTABLE: fmt header-only (${AIR_FMT_INCLUDE_DIR}), yaml-cpp ${AIR_YAML_CPP_STATIC}, "
               "libyaml ${AIR_LIBYAML_STATIC}, static libstdc++")

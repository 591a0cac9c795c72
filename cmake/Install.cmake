# `cmake --install` (and `make install PREFIX=... DESTDIR=...`): air-run,
# air-nccl-check when it was built, the man page and the bash and zsh
# completions generated from the binary, the `air` Python package where the
# interpreter looks for packages, and the documentation.
include(GNUInstallDirs)

# air-run-docs: the generated man page and completions (cmake/GenerateDocs.cmake).
set(AIR_DOCS_DIR ${CMAKE_BINARY_DIR}/docs-generated)
add_custom_command(
  OUTPUT ${AIR_DOCS_DIR}/air-run.1.gz ${AIR_DOCS_DIR}/air-run.bash ${AIR_DOCS_DIR}/_air-run
  COMMAND ${CMAKE_COMMAND} -DAIR_RUN=$<TARGET_FILE:air-run> -DOUT=${AIR_DOCS_DIR} -P
          ${CMAKE_CURRENT_LIST_DIR}/GenerateDocs.cmake
  DEPENDS air-run ${CMAKE_CURRENT_LIST_DIR}/GenerateDocs.cmake
  COMMENT "Generating the air-run man page and shell completions"
  VERBATIM)
add_custom_target(air-run-docs ALL DEPENDS ${AIR_DOCS_DIR}/air-run.1.gz)

# Where the `air` package goes, relative to the prefix: the first packages
# directory under <prefix>/lib* on the interpreter's path (Debian's python3:
# lib/python3/dist-packages for /usr, lib/python3.X/dist-packages for
# /usr/local; a venv's lib/python3.X/site-packages). Python3_EXECUTABLE picks
# the interpreter; AIR_PYTHON_INSTALL_DIR overrides the answer.
set(AIR_PYTHON_INSTALL_DIR "" CACHE STRING
    "Directory for the air Python package, relative to the prefix (default: asked from the interpreter)")
set(AIR_PYTHON_DIR "${AIR_PYTHON_INSTALL_DIR}")
if(NOT AIR_PYTHON_DIR)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c [[
import os, site, sys
prefix = os.path.realpath(sys.argv[1])
user = [site.getusersitepackages()] if site.ENABLE_USER_SITE else []
for path in sys.path + site.getsitepackages() + user:
    real = os.path.realpath(path)
    relative = os.path.relpath(real, prefix)
    if real.endswith("-packages") and relative.startswith("lib"):  # not /usr/local/... for /usr
        print(relative)
        break
]] ${CMAKE_INSTALL_PREFIX}
      OUTPUT_VARIABLE AIR_PYTHON_DIR OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  if(NOT AIR_PYTHON_DIR)
    set(AIR_PYTHON_DIR lib/python3/dist-packages)
    message(STATUS "air Python package: no packages directory of ${Python3_EXECUTABLE} under "
                   "${CMAKE_INSTALL_PREFIX}; installing to ${AIR_PYTHON_DIR} (add it to PYTHONPATH)")
  endif()
endif()
message(STATUS "air Python package installs to ${CMAKE_INSTALL_PREFIX}/${AIR_PYTHON_DIR}")

# Debian's zsh reads vendor completions from /usr/share/zsh/vendor-completions;
# other prefixes use the usual site-functions.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(AIR_ZSH_DIR ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
else()
  set(AIR_ZSH_DIR ${CMAKE_INSTALL_DATADIR}/zsh/site-functions)
endif()

set(AIR_DOC_DIR ${CMAKE_INSTALL_DATAROOTDIR}/doc/air-run) # the package's name, not the project's

install(TARGETS air-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET air-nccl-check)
  install(TARGETS air-nccl-check RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}) # air-run looks next to itself
endif()
install(FILES ${AIR_DOCS_DIR}/air-run.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${AIR_DOCS_DIR}/air-run.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME air-run)
install(FILES ${AIR_DOCS_DIR}/_air-run DESTINATION ${AIR_ZSH_DIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/air DESTINATION ${AIR_PYTHON_DIR}
        PATTERN __pycache__ EXCLUDE PATTERN "*.pyc" EXCLUDE PATTERN bin EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${AIR_DOC_DIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${AIR_DOC_DIR}/docs
        PATTERN gpu-runs EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs DESTINATION ${AIR_DOC_DIR})

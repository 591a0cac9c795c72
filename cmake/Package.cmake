# `make package`: air-run_<version>_<arch>.deb with CPack's DEB generator.
# Depends comes from dpkg-shlibdeps over the binary, so it is exactly what the
# binary links: with AIR_PORTABLE that is libc6 alone (fmt, yaml-cpp, libyaml and
# libstdc++ are inside). python3 is recommended: the `air` package and Python
# targets need it, air-run itself does not. Build it with
# CMAKE_INSTALL_PREFIX=/usr (the Makefile does), so that the files land where
# Debian's tools look (man, bash-completion, python3).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME air-run)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "launcher for distributed training, one process per accelerator")
set(CPACK_PACKAGE_DESCRIPTION
    "air-run starts and supervises one process per GPU (or CPU rank) for PyTorch
distributed training, torchrun-style, from flags or a YAML spec, and reports
the first failure with its cause. Includes the air Python package
(@distributed and a TorchDistributor drop-in).")
set(CPACK_PACKAGE_CONTACT "air-run maintainers <air-run@users.noreply.github.com>")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # air-run_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
# libcurl is loaded at run time, for MLflow tracking only: recommended, not required.
# python3-cloudpickle: @distributed sends a function defined in __main__ by value.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3, python3-cloudpickle, libcurl4")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-torch")

set(AIR_DEB_PYTHON_DIR ${CMAKE_INSTALL_PREFIX}/${AIR_PYTHON_DIR})
configure_file(${CMAKE_CURRENT_LIST_DIR}/deb/prerm.in ${CMAKE_BINARY_DIR}/deb/prerm @ONLY) # keeps its mode
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/deb/prerm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)

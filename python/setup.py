"""Builds the air-run distribution: the `air` package and, when a binary is
given, the air-run binary as package data (air/bin/air-run) with an `air-run`
command that runs it, the way the cmake and ninja wheels carry their programs.
Such a wheel is a platform wheel (py3-none-<platform>): the binary does not
depend on the Python version.

    AIR_RUN_WHEEL_BINARY=build-release/cli/air-run \\
        python3 -m pip wheel ./python --no-build-isolation --no-deps -w dist

AIR_RUN_WHEEL_BINARY  the air-run to carry; without it the wheel is pure
                      Python (py3-none-any) and its `air-run` command says so
AIR_RUN_WHEEL_PLATFORM  the platform tag (default: this machine's, e.g.
                      linux_x86_64; manylinux_2_31_x86_64 for the binary of
                      scripts/build-portable.sh)
AIR_RUN_WHEEL_BUILD_DIR  where setuptools keeps its build files (default:
                      python/build)
`make wheel` sets all three. Metadata lives in pyproject.toml.
"""

import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: sdists and in-place installs still work
    bdist_wheel = None


def _binary():
    path = os.environ.get("AIR_RUN_WHEEL_BINARY")
    if path and not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SystemExit("AIR_RUN_WHEEL_BINARY=%s is not an executable file" % path)
    return path or None


class BuildPyWithBinary(build_py):
    """Copies the binary into the built package (air/bin/air-run), or makes
    sure no binary of an earlier build is left there."""

    def run(self):
        super().run()
        bindir = os.path.join(self.build_lib, "air", "bin")
        shutil.rmtree(bindir, ignore_errors=True)
        if _binary():
            os.makedirs(bindir)
            shutil.copy2(_binary(), os.path.join(bindir, "air-run"))  # keeps the executable bits


commands = {"build_py": BuildPyWithBinary}

if bdist_wheel is not None:

    class PlatformWheel(bdist_wheel):
        """A wheel with the binary is tied to a platform, not to a Python."""

        def finalize_options(self):
            if _binary() and os.environ.get("AIR_RUN_WHEEL_PLATFORM"):
                self.plat_name = os.environ["AIR_RUN_WHEEL_PLATFORM"]
            super().finalize_options()
            if _binary():
                self.root_is_pure = False

        def get_tag(self):
            python, abi, platform = super().get_tag()
            return ("py3", "none", platform) if _binary() else (python, abi, platform)

    commands["bdist_wheel"] = PlatformWheel

options = {}
build_dir = os.environ.get("AIR_RUN_WHEEL_BUILD_DIR")
if build_dir:
    os.makedirs(build_dir, exist_ok=True)
    options = {"build": {"build_base": build_dir}, "egg_info": {"egg_base": build_dir}}

setup(cmdclass=commands, options=options)

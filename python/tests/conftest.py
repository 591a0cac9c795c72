"""Shared fixtures. Run with: /usr/bin/python3 -m pytest python/tests

Tests that need the air-run binary use the `air_run` fixture and skip with a
reason when it is not found ($AIR_RUN_BINARY, `air-run` on PATH, or
<repo>/build/cli/air-run); `make test` builds it and sets AIR_RUN_BINARY.
"""

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

PYTHON_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(PYTHON_ROOT)
if PYTHON_ROOT not in sys.path:
    sys.path.insert(0, PYTHON_ROOT)

import air  # noqa: E402
from air import _binary  # noqa: E402


def find_binary():
    try:
        return _binary.find_air_run()
    except RuntimeError:
        return None


@pytest.fixture
def air_run():
    """Path of the real air-run binary; skips the test when there is none."""
    path = find_binary()
    if path is None:
        pytest.skip("air-run binary not found: build it (cmake -S . -B build && cmake --build "
                    "build) or set AIR_RUN_BINARY")
    return path


@pytest.fixture
def torch():
    """Skips unless torch is importable by this interpreter (the ranks use it);
    looked up without importing it here, which takes seconds."""
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed for %s" % sys.executable)


@pytest.fixture(autouse=True)
def _fresh_caches():
    _binary._checked.clear()
    _binary._gpu_cache.clear()
    yield
    _binary._checked.clear()
    _binary._gpu_cache.clear()


def subprocess_env(**extra):
    """Environment for a child Python that must import this air package."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [PYTHON_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(extra)
    return env


def run_python(args, env=None, timeout=120, cwd=None):
    return subprocess.run([sys.executable] + list(args), env=env or subprocess_env(), cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                          universal_newlines=True)


@pytest.fixture
def fake_air_run(tmp_path):
    """Makes a fake air-run (a shell script) that answers --version and
    --list-gpus; returns a factory(version, gpus) -> path. It cannot launch."""

    def make(version="0.1.0", gpus=0, version_output=None):
        listing = {"accelerator_type": "GPU_%dxH200" % gpus if gpus else "CPU",
                   "gpus": [{"index": i, "name": "NVIDIA H200"} for i in range(gpus)]}
        out = version_output if version_output is not None else "air-run %s" % version
        path = tmp_path / ("fake-air-run-%s-%d" % (version, gpus))
        path.write_text(textwrap.dedent("""\
            #!/bin/sh
            case "$1" in
              --version) echo '%s'; exit 0 ;;
              --list-gpus) echo '%s'; exit 0 ;;
            esac
            echo "air-run: error: fake air-run cannot launch" >&2
            exit 2
            """) % (out, json.dumps(listing)))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return str(path)

    return make

"""scripts/install-python.sh: a .pth file makes this checkout's air importable."""

import os
import subprocess
import sys

import pytest

from conftest import PYTHON_ROOT, REPO_ROOT

SCRIPT = os.path.join(REPO_ROOT, "scripts", "install-python.sh")


def run_script(*args):
    return subprocess.run(["sh", SCRIPT] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120)


def test_install_into_a_venv_is_idempotent_and_removable(tmp_path):
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if made.returncode != 0:
        pytest.skip("venv is not available for %s" % sys.executable)
    py = str(venv / "bin" / "python")
    purelib = subprocess.check_output(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        universal_newlines=True).strip()
    pth = os.path.join(purelib, "air-run.pth")

    first = run_script(py)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "install-python: %s: wrote %s -> %s\n" % (py, pth, PYTHON_ROOT)
    with open(pth) as f:
        assert f.read() == PYTHON_ROOT + "\n"
    imported = subprocess.check_output([py, "-c", "import air; print(air.__file__)"],
                                       cwd="/", universal_newlines=True).strip()
    assert imported == os.path.join(PYTHON_ROOT, "air", "__init__.py")

    again = run_script(py)
    assert again.returncode == 0, again.stderr
    assert again.stdout == "install-python: %s: %s already present\n" % (py, pth)

    removed = run_script("--remove", py)
    assert removed.returncode == 0, removed.stderr
    assert not os.path.exists(pth)


def test_missing_interpreter_is_skipped():
    done = run_script("/nonexistent/python9")
    assert done.returncode == 0
    assert done.stderr == "install-python: skip /nonexistent/python9: not found\n"

"""The GPU checks of gpu_data_checks.py (FSDP2 save/restore through air.data on
2 GPUs, the page's quick start under the three import paths), run when this
machine has them; skipped elsewhere with the reason."""

import os
import subprocess
import sys

import pytest

from air import _binary
from conftest import subprocess_env

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_data_checks.py")


def test_gpu_checks(air_run):
    found = _binary.gpu_count(_binary.list_gpus(air_run))
    if found < 2:  # asked of air-run first: no torch import on a CPU machine
        pytest.skip("GPU checks: need 2 NVIDIA GPUs, air-run --list-gpus finds %d" % found)
    probe = subprocess.run([sys.executable, "-c", "import gpu_data_checks as g; "
                            "print(g.why_not() or '')"],
                           cwd=os.path.dirname(SCRIPT), env=subprocess_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120)
    reason = probe.stdout.strip() if probe.returncode == 0 else probe.stderr.strip()[-300:]
    if reason:
        pytest.skip("GPU checks: %s" % reason)
    done = subprocess.run([sys.executable, SCRIPT], env=subprocess_env(AIR_RUN_BINARY=air_run),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=1200)
    print(done.stdout)
    assert done.returncode == 0, done.stdout[-3000:]

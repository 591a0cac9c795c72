"""TorchDistributor drop-in and the unchanged-script runner, without launching."""

import importlib.util
import os
import sys

import pytest

import air
from air import TorchDistributor
from conftest import PYTHON_ROOT, run_python, subprocess_env


def test_num_processes_must_be_positive():
    with pytest.raises(ValueError, match="num_processes has to be a positive integer"):
        TorchDistributor(num_processes=0, use_gpu=False)


def test_file_mode_refuses_keyword_arguments():
    with pytest.raises(ValueError, match="Running pytorch file does not support key-word type "
                                         "arguments."):
        TorchDistributor(num_processes=2, use_gpu=False).run("train.py", lr=1)


def test_local_mode_false_warns():
    with pytest.warns(UserWarning, match=r"TorchDistributor\(local_mode=False\) needs a Spark "
                                         r"cluster; air-run supports only local mode"):
        distributor = TorchDistributor(num_processes=2, local_mode=False, use_gpu=False)
    assert distributor._placement() == ["--accelerator-type", "CPU", "--cpu-ranks", "2"]


def test_use_gpu_clamps_to_available_gpus(fake_air_run, monkeypatch):
    monkeypatch.setenv("AIR_RUN_BINARY", fake_air_run(gpus=2))
    with pytest.warns(RuntimeWarning, match="'num_processes' was reset to be equal to the "
                                            "number of available GPUs"):
        distributor = TorchDistributor(num_processes=4, use_gpu=True)
    assert distributor.num_processes == 2
    assert distributor._placement() == ["-n", "2"]


def test_use_gpu_without_gpu_runs_on_cpu(fake_air_run, monkeypatch):
    monkeypatch.setenv("AIR_RUN_BINARY", fake_air_run(gpus=0))
    with pytest.warns(UserWarning, match=r"TorchDistributor\(use_gpu=True\) but no GPU was "
                                         r"found; running the 3 processes on CPU"):
        distributor = TorchDistributor(num_processes=3, use_gpu=True)
    assert distributor._placement() == ["--accelerator-type", "CPU", "--cpu-ranks", "3"]


def test_use_gpu_false_hides_gpus():
    distributor = TorchDistributor(num_processes=2, use_gpu=False)
    assert distributor._extra_env() == {"CUDA_VISIBLE_DEVICES": ""}


def _runner_env(tmp_path):
    env = subprocess_env()
    if importlib.util.find_spec("pyspark") is not None:
        env["AIR_FORCE_COMPAT"] = "1"
    return env


def test_runner_gives_scripts_the_stand_in(tmp_path):
    script = tmp_path / "old_script.py"
    (tmp_path / "helper_mod.py").write_text("VALUE = 'helper imported'\n")
    script.write_text(
        "import os, sys\n"
        "from pyspark.ml.torch.distributor import TorchDistributor\n"
        "from pyspark.ml.torch import TorchDistributor as T2\n"
        "import air, helper_mod\n"
        "print('same', TorchDistributor is air.TorchDistributor is T2)\n"
        "print('name', __name__)\n"
        "print('argv', sys.argv)\n"
        "print('helper', helper_mod.VALUE)\n"
        "print('pythonpath-first', os.environ['PYTHONPATH'].split(os.pathsep)[0].endswith("
        "os.path.join('air', '_compat')))\n")
    done = run_python(["-m", "air.torch_distributor", str(script), "--lr", "0.1"],
                      env=_runner_env(tmp_path), cwd="/")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "same True", "name __main__", "argv ['%s', '--lr', '0.1']" % script,
        "helper helper imported", "pythonpath-first True"]


def test_runner_script_exception_exits_nonzero(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("raise SystemExit(5)\n")
    done = run_python(["-m", "air.torch_distributor", str(script)], env=_runner_env(tmp_path))
    assert done.returncode == 5


def test_runner_missing_script():
    done = run_python(["-m", "air.torch_distributor", "/nonexistent.py"])
    assert done.returncode == 2
    assert done.stderr == "air.torch_distributor: error: no such script: /nonexistent.py\n"


def test_real_pyspark_is_not_shadowed(tmp_path):
    """With a (fake) real pyspark importable, the stand-in stays out unless forced."""
    site = tmp_path / "site"
    (site / "pyspark").mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("REAL = True\n")
    script = tmp_path / "which.py"
    script.write_text("import pyspark\nprint(getattr(pyspark, 'REAL', False), "
                      "getattr(pyspark, '__air_compat__', False))\n")
    env = subprocess_env()
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_ROOT, str(site)])
    env.pop("AIR_FORCE_COMPAT", None)
    done = run_python(["-m", "air.torch_distributor", str(script)], env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True False\n"
    env["AIR_FORCE_COMPAT"] = "1"
    done = run_python(["-m", "air.torch_distributor", str(script)], env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "False True\n"


# ------------------------------------------- scripts and functions print the same lines

SAME_LINES_SCRIPT = """\
import sys
from air import TorchDistributor


def train_fn():
    import os
    print("hello from", os.environ["RANK"], flush=True)


TorchDistributor(num_processes=2, use_gpu=False).run(sys.argv[1])
print("=== function ===", flush=True)
sys.stderr.write("=== function ===\\n")
TorchDistributor(num_processes=2, use_gpu=False).run(train_fn)
"""


def test_scripts_and_functions_print_the_same_air_run_lines(air_run, tmp_path):
    # TorchDistributor.run("script.py") and .run(fn) both go through
    # _launch.run_air_run: the ranks' lines are printed, air-run's notices
    # (OMP_NUM_THREADS) and end-of-run report are not, for either.
    (tmp_path / "hello.py").write_text('import os\nprint("hello from", os.environ["RANK"], flush=True)\n')
    (tmp_path / "caller.py").write_text(SAME_LINES_SCRIPT)
    done = run_python([str(tmp_path / "caller.py"), str(tmp_path / "hello.py")], cwd=str(tmp_path),
                      env=subprocess_env(AIR_RUN_BINARY=air_run))
    assert done.returncode == 0, done.stderr
    out_file, out_fn = done.stdout.split("=== function ===\n")
    err_file, err_fn = done.stderr.split("=== function ===\n")
    for out, err in ((out_file, err_file), (out_fn, err_fn)):
        assert "[rank1]: hello from 1" in out
        assert "air-run: " not in out + err, out + err

"""The product page's import paths (databricks.air, serverless_gpu), its enums,
remote= and ray_init; no launch needed."""

import importlib
import os
import shutil
import subprocess
import sys
import warnings
import zipfile

import pytest

import air
from air import _launch
from conftest import PYTHON_ROOT, run_python, subprocess_env


def fresh_import(name):
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[loaded]
    return importlib.import_module(name)


def test_databricks_air_is_air():
    import databricks.air as dbair
    for name in air.__all__:
        assert getattr(dbair, name) is getattr(air, name), name
    from databricks.air import distributed, ray_init  # the page's first line
    assert distributed is air.distributed and ray_init is air.ray_init
    # A PEP 420 namespace: no databricks/__init__.py to shadow another distribution.
    import databricks
    assert getattr(databricks, "__file__", None) is None


def test_serverless_gpu_warns_and_aliases():
    with pytest.warns(FutureWarning) as record:
        sg = fresh_import("serverless_gpu")
    messages = [str(w.message) for w in record if w.category is FutureWarning]
    assert messages == [sg.DEPRECATION]
    assert "from databricks.air import distributed, ray_init" in sg.DEPRECATION
    from serverless_gpu import distributed, ray_init, GPUType
    assert distributed is air.distributed and ray_init is air.ray_init
    assert GPUType is air.GPUType


def test_serverless_gpu_warning_in_a_fresh_interpreter():
    done = run_python(["-c", "from serverless_gpu import distributed, ray_init"])
    assert done.returncode == 0, done.stderr
    assert "FutureWarning: serverless_gpu is deprecated" in done.stderr
    assert "<string>:1: FutureWarning" in done.stderr


def test_data_aliases_in_both_paths(torch):
    import air.data
    import databricks.air.data as uc
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import serverless_gpu.data as sg_data
    for module in (uc, sg_data):
        assert module.UCVolumeDataset is air.data.VolumeDataset
        assert module.UCVolumeWriter is air.data.VolumeWriter
        assert module.UCVolumeReader is air.data.VolumeReader
        assert module.latest is air.data.latest
        assert set(module.__all__) >= {"UCVolumeDataset", "UCVolumeWriter", "UCVolumeReader"}
    with pytest.raises(AttributeError):
        air.data.UCVolumeDataset  # air.data keeps its own names only
    with pytest.raises(AttributeError):
        uc.NoSuchThing


def test_importing_air_data_does_not_import_torch():
    done = run_python(["-c", "import sys, air.data, databricks.air.data; "
                             "print('torch' in sys.modules)"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("sdk_style", ["pkgutil", "namespace"])
@pytest.mark.parametrize("sdk_first", [True, False])
def test_databricks_air_coexists_with_databricks_sdk(tmp_path, sdk_style, sdk_first):
    """Another distribution's databricks.sdk (pkgutil-style __init__.py, as the
    Databricks SDK ships, or a PEP 420 portion) does not hide databricks.air."""
    sdk = tmp_path / "site" / "databricks"
    (sdk / "sdk").mkdir(parents=True)
    (sdk / "sdk" / "__init__.py").write_text("WHO = 'sdk'\n")
    if sdk_style == "pkgutil":
        (sdk / "__init__.py").write_text(
            "__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n")
    site = str(tmp_path / "site")
    order = [site, PYTHON_ROOT] if sdk_first else [PYTHON_ROOT, site]
    env = subprocess_env(PYTHONPATH=os.pathsep.join(order))
    done = run_python(["-c", "import databricks.sdk, databricks.air, air; "
                             "print(databricks.sdk.WHO, databricks.air.distributed is "
                             "air.distributed)"], env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["sdk", "True"]


def test_enum_values_are_the_pages():
    assert [m.value for m in air.AcceleratorType] == [
        "GPU_1xA10", "GPU_1xH100", "GPU_8xH100", "GPU_8xB300", "CPU"]
    assert [m.value for m in air.GPUType] == ["A10", "H100", "B300"]
    assert str(air.AcceleratorType.GPU_8xH100) == "GPU_8xH100"
    assert air.AcceleratorType("GPU_1xA10") is air.AcceleratorType.GPU_1xA10


def test_enums_are_accepted_where_strings_are(fake_air_run):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = air.distributed(accelerator_type=air.AcceleratorType.GPU_8xH100)(len)
    assert f.accelerator_type == "GPU_8xH100" and type(f.accelerator_type) is str
    with pytest.warns(FutureWarning, match="accelerator type 'B300' is deprecated"):
        g = air.distributed(gpu_type=air.GPUType.B300, gpus=8)(len)
    assert (g.accelerator_type, g.num_accelerators) == ("B300", 8)
    binary = fake_air_run(gpus=8)
    assert _launch.placement_flags(binary, {}, None, f.accelerator_type) == [
        "--accelerator-type", "GPU_8xH100"]
    cpu = air.distributed(accelerator_type=air.AcceleratorType.CPU, num_accelerators=2)(len)
    assert _launch.placement_flags(binary, {}, 2, cpu.accelerator_type) == [
        "--accelerator-type", "CPU", "--cpu-ranks", "2"]


def test_legacy_model_alone_is_passed_bare(fake_air_run):
    """gpu_type="H100" without a count: no -n, so air-run picks the count (every
    GPU of the family), never a count of 1 made up here."""
    with pytest.warns(FutureWarning):
        f = air.distributed(gpu_type="H100")(len)
    binary = fake_air_run(gpus=8)
    assert _launch.placement_flags(binary, {}, f.num_accelerators, f.accelerator_type) == [
        "--accelerator-type", "H100"]


def test_remote_false_accepted_true_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert air.distributed(remote=False)(len).accelerator_type is None
    with pytest.raises(ValueError) as info:
        air.distributed(remote=True)
    assert "remote=True is not supported" in str(info.value)
    assert "local node" in str(info.value)
    with pytest.raises(TypeError, match="remote must be True or False"):
        air.distributed(remote="yes")


@pytest.mark.parametrize("module", ["air", "databricks.air", "serverless_gpu"])
def test_ray_init_names_the_reason(module):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ray_init = importlib.import_module(module).ray_init
    with pytest.raises(NotImplementedError) as info:
        ray_init(num_cpus=2)
    assert isinstance(info.value, air.RayNotSupportedError)
    assert "no Ray integration" in str(info.value)


def test_wheel_carries_the_alias_packages(tmp_path):
    """pip builds a wheel with air, databricks/air and serverless_gpu, and no
    databricks/__init__.py (a namespace)."""
    pip_ok = subprocess.run([sys.executable, "-c", "import setuptools, wheel, pip"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if pip_ok.returncode != 0:
        pytest.skip("pip, setuptools and wheel are needed for %s" % sys.executable)
    # Build from a copy: the build leaves build/ and *.egg-info next to pyproject.toml.
    tree = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "tests", "*.egg-info", "build")
    shutil.copytree(PYTHON_ROOT, str(tree), ignore=ignore)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "--no-index", "-w", str(tmp_path / "dist"),
                           str(tree)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300)
    assert done.returncode == 0, done.stdout
    wheels = list((tmp_path / "dist").glob("*.whl"))
    assert len(wheels) == 1
    names = set(zipfile.ZipFile(str(wheels[0])).namelist())
    for expected in ("air/__init__.py", "air/data/__init__.py", "air/data/_checkpoint.py",
                     "databricks/air/__init__.py", "databricks/air/data/__init__.py",
                     "serverless_gpu/__init__.py", "serverless_gpu/data/__init__.py"):
        assert expected in names
    assert "databricks/__init__.py" not in names

"""Finding the air-run binary, checking its version, asking it about GPUs."""

import json
import os
import re
import shutil
import subprocess

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# python/air -> python -> repository root (in a checkout; elsewhere, just a directory)
REPO_ROOT = os.path.dirname(os.path.dirname(_PACKAGE_DIR))
PYTHON_ROOT = os.path.dirname(_PACKAGE_DIR)

_checked = {}   # (path, mtime) -> version text
_gpu_cache = {}  # (path, mtime, CUDA_VISIBLE_DEVICES, AIR_RUN_* hardware overrides) -> dict


def packaged_binary():
    """The air-run the wheel installed with this package (air/bin/air-run),
    or None when the package came without one (a checkout, the .deb)."""
    path = os.path.join(_PACKAGE_DIR, "bin", "air-run")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def _in_checkout():
    return os.path.isfile(os.path.join(REPO_ROOT, "CMakeLists.txt"))


def find_air_run():
    """Path of the air-run binary: $AIR_RUN_BINARY, else the one packaged
    with this package (the wheel's), else `air-run` on PATH, else, in a
    checkout, its build (<repo>/build/cli/air-run). RuntimeError when none is
    usable."""
    explicit = os.environ.get("AIR_RUN_BINARY")
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise RuntimeError("AIR_RUN_BINARY=%s is not an executable file" % explicit)
        return os.path.abspath(explicit)
    packaged = packaged_binary()
    if packaged:
        return packaged
    on_path = shutil.which("air-run")
    if on_path:
        return on_path
    if _in_checkout():
        built = os.path.join(REPO_ROOT, "build", "cli", "air-run")
        if os.path.isfile(built) and os.access(built, os.X_OK):
            return built
        raise RuntimeError(
            "air: the air-run binary was not found: set AIR_RUN_BINARY to its path, put air-run on "
            "PATH, or build it in this checkout (make build), which gives %s" % built)
    raise RuntimeError(
        "air: the air-run binary was not found: set AIR_RUN_BINARY to its path or put air-run on "
        "PATH; the air-run wheel and the .deb install it (see docs/install.md)")


def _version_of(path):
    try:
        done = subprocess.run([path, "--version"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError("air: could not run %s --version: %s" % (path, e))
    text = done.stdout.decode("utf-8", "replace").strip()
    match = re.match(r"^air-run\s+(\S+)", text)
    if done.returncode != 0 or not match:
        raise RuntimeError("air: %s --version did not print 'air-run X.Y.Z' (exit code %d, "
                           "output %r); is it the air-run launcher?"
                           % (path, done.returncode, text[:200]))
    return match.group(1)


def check_version(path):
    """Raises RuntimeError when the binary's version differs from the package's
    (AIR_SKIP_VERSION_CHECK=1 skips the check). Cached per binary file."""
    if os.environ.get("AIR_SKIP_VERSION_CHECK") == "1":
        return
    from air import __version__
    key = (path, _mtime(path))
    version = _checked.get(key)
    if version is None:
        version = _version_of(path)
        _checked[key] = version
    if version != __version__:
        raise RuntimeError(
            "air: version mismatch: the air Python package is %s (%s) but the air-run binary is "
            "%s (%s). Use the binary built from the same checkout (set AIR_RUN_BINARY), or set "
            "AIR_SKIP_VERSION_CHECK=1 to run anyway."
            % (__version__, _PACKAGE_DIR, version, path))


def resolve_binary():
    """find_air_run() followed by check_version()."""
    path = find_air_run()
    check_version(path)
    return path


def _mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def list_gpus(path, env=None):
    """What air-run sees: {"accelerator_type": "GPU_2xH200" or "CPU", "gpus": [...]}."""
    env = os.environ if env is None else env
    key = (path, _mtime(path)) + tuple(sorted(
        (k, v) for k, v in env.items() if k == "CUDA_VISIBLE_DEVICES" or k.startswith("AIR_")))
    cached = _gpu_cache.get(key)
    if cached is not None:
        return cached
    try:
        done = subprocess.run([path, "--list-gpus", "--json"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env),
                              timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError("air: could not run %s --list-gpus --json: %s" % (path, e))
    if done.returncode != 0:
        raise RuntimeError("air: %s --list-gpus --json failed (exit code %d): %s"
                           % (path, done.returncode,
                              done.stderr.decode("utf-8", "replace").strip()))
    try:
        info = json.loads(done.stdout.decode("utf-8", "replace"))
        info["gpus"] = list(info.get("gpus") or [])
        info.setdefault("accelerator_type", "CPU" if not info["gpus"] else "")
    except (ValueError, AttributeError) as e:
        raise RuntimeError("air: %s --list-gpus --json printed something that is not the "
                           "expected JSON object: %s" % (path, e))
    _gpu_cache[key] = info
    return info


def gpu_count(info):
    """Number of GPUs in a list_gpus() answer (0 on a CPU machine)."""
    if info.get("accelerator_type") == "CPU":
        return 0
    return len(info.get("gpus") or [])

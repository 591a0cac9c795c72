"""Run an unmodified TorchDistributor script: ``python -m air.torch_distributor SCRIPT ARGS...``.

(``air-run --torch-distributor SCRIPT ARGS...`` runs this module.) The script's
``from pyspark.ml.torch.distributor import TorchDistributor`` gets
air.TorchDistributor: the stand-in pyspark package in air/_compat is put first
on sys.path (and on PYTHONPATH, for the processes the script starts), then the
script runs as ``__main__`` with sys.argv = [SCRIPT, ARGS...], as
``python SCRIPT ARGS...`` would run it.

When a real pyspark is importable it is used as is (its TorchDistributor then
needs Spark); set AIR_FORCE_COMPAT=1 to use the air stand-in anyway.
"""

import importlib.util
import os
import runpy
import sys

COMPAT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_compat")


def _real_pyspark_available():
    if "pyspark" in sys.modules:
        return not getattr(sys.modules["pyspark"], "__air_compat__", False)
    try:
        return importlib.util.find_spec("pyspark") is not None
    except (ImportError, ValueError):
        return False


def use_compat():
    """True when the stand-in pyspark should be used (see module doc)."""
    return os.environ.get("AIR_FORCE_COMPAT") == "1" or not _real_pyspark_available()


def install_compat():
    """Puts the stand-in first on sys.path and PYTHONPATH; returns True if done."""
    if not use_compat():
        return False
    if COMPAT_DIR not in sys.path:
        sys.path.insert(0, COMPAT_DIR)
    for name in [m for m in sys.modules if m == "pyspark" or m.startswith("pyspark.")]:
        del sys.modules[name]  # a forced stand-in replaces an already imported pyspark
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if COMPAT_DIR not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([COMPAT_DIR] + parts)
    return True


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        sys.stderr.write("usage: python -m air.torch_distributor SCRIPT [ARGS...]\n"
                         "Runs a TorchDistributor script unchanged on air-run.\n")
        return 0 if argv else 2
    script = argv[0]
    if not os.path.isfile(script):
        sys.stderr.write("air.torch_distributor: error: no such script: %s\n" % script)
        return 2
    install_compat()
    sys.argv = argv
    # As `python SCRIPT` does: the script's directory comes first on sys.path.
    script_dir = os.path.dirname(os.path.abspath(script))
    if sys.path and sys.path[0] in ("", os.getcwd()):
        sys.path[0] = script_dir
    else:
        sys.path.insert(0, script_dir)
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())

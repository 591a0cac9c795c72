"""The shim's stacks: arms faulthandler so that air-run can ask a rank for every
thread's Python stack, and runs the sitecustomize the shim shadows.

Its text opens the rank's sitecustomize.py (core/run/stacks.cpp assembles it);
the imports of os and sys below serve every later part.
"""
# ---- air-run embeds this file from the next line on ----
# Written by air-run for one run. Arms faulthandler so that air-run can ask
# this rank for every thread's Python stack (on a timeout, a hang, or on
# Ctrl-\), counts the rank's training steps and collectives in a page shared
# with air-run (see _air_run_progress below), then runs the sitecustomize this
# file shadows, if there is one.
import os
import sys


def _air_run_arm():
    path = os.environ.get("AIR_RUN_STACK_FILE")
    signum = os.environ.get("AIR_RUN_STACK_SIGNAL")
    if not path or not signum:
        return
    try:
        # Only the rank itself: its children (DataLoader workers, subprocesses)
        # inherit the environment but are not the leaders of the rank's group.
        if os.getpid() != os.getpgid(0):
            return
        import faulthandler

        stack_file = open(path, "a", buffering=1)
        faulthandler.register(int(signum), file=stack_file, all_threads=True, chain=False)
        sys._air_run_stack_file = stack_file  # open for the life of the process
    except Exception:
        pass


def _air_run_add_package():
    """air-run's own `air` package, appended behind every user path and
    site-packages: a checkout's ranks can `import air`, an installed one wins.
    Rank 0 says once when an installed `air` differs from air-run's."""
    pkg = os.environ.get("AIR_RUN_PYTHON_PACKAGE_DIR")
    if not pkg or pkg in sys.path:
        return
    try:
        if os.environ.get("RANK") == "0":
            import importlib.util
            import re

            spec = importlib.util.find_spec("air")
            origin = spec.origin if spec is not None else None
            if origin and not os.path.abspath(origin).startswith(os.path.abspath(pkg) + os.sep):

                def version(path):
                    m = re.search(r'__version__\s*=\s*"([^"]+)"', open(path).read())
                    return m.group(1) if m else "unknown"

                mine, theirs = version(os.path.join(pkg, "air", "__init__.py")), version(origin)
                if mine != theirs:
                    sys.stderr.write(
                        "air-run: the installed air package %s (version %s) is used, not air-run's "
                        "%s (version %s)\n" % (os.path.dirname(origin), theirs, pkg, mine)
                    )
    except Exception:
        pass
    sys.path.append(pkg)


def _air_run_chain():
    here = os.path.dirname(os.path.abspath(__file__))
    me = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        import sitecustomize  # noqa: F401  the next one on the path
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
    finally:
        sys.path[:] = saved
        # Without another sitecustomize, this module must be back in
        # sys.modules: the import that runs it looks itself up there at the
        # end (Python 3.11 raised KeyError: 'sitecustomize').
        if "sitecustomize" not in sys.modules and me is not None:
            sys.modules["sitecustomize"] = me

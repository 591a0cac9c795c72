"""The shim's start: what the rank's sitecustomize.py runs, in order (the
exception recorder, the store's linger at exit, stacks, progress, the later parts such as the MLflow
wait, then the shadowed sitecustomize), and the same for a rank forked by
the warm start.
"""
import sys

from air_run_errors import _air_run_record_errors
from air_run_progress import _air_run_progress
from air_run_stacks import _air_run_add_package, _air_run_arm, _air_run_chain
from air_run_store import _air_run_store_linger

# ---- air-run embeds this file from the next line on ----
def _air_run_rank_start():
    """A rank forked from the warm start's interpreter, whose own start-up
    ran this file without a rank's variables: armed now, with them."""
    _air_run_add_package()
    _air_run_arm()
    _air_run_progress()


sys._air_run_rank_start = _air_run_rank_start
_air_run_record_errors()
_air_run_store_linger()
_air_run_add_package()
_air_run_arm()
_air_run_progress()
# air-run: the later parts start here
_air_run_chain()

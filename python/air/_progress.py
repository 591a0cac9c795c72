"""Training progress shared with air-run: steps, and preemption's stop step.

Inside a rank that air-run launched, its sitecustomize shim already counts
optimizer steps and torch.distributed collectives into a page of memory that
air-run reads (for hang and straggler diagnosis, and to agree on a stop step
when the job is preempted). These functions reach that counter; outside
air-run they do nothing and never stop the loop.
"""

import sys


def _progress():
    return getattr(sys, "_air_run_progress", None)


def step():
    """Counts one training step, for loops that do not call an optimizer's
    ``step()`` (which air-run counts by itself). When both happen, a rank's
    count is the larger of the two, so nothing is counted twice."""
    progress = _progress()
    if progress is not None:
        progress.step()


def should_stop():
    """True once air-run asked the run to stop (SIGTERM, or a signal named in
    ``--signals-to-handle``) and this rank has reached the stop step that air-run
    chose for every rank: the same step on all of them, so each saves a
    checkpoint of the same step. Cheap enough to call every step. A rank that
    calls it is no longer sent SIGTERM at once on preemption: it must save
    and exit before ``stop_deadline()``. Its first call (on the main thread)
    also defers a SIGTERM sent to the rank itself, as Slurm sends it to every
    process, to that stop step, unless the program set a SIGTERM handler of
    its own (docs/preemption.md)."""
    progress = _progress()
    return progress is not None and progress.should_stop()


def stop_deadline():
    """Seconds left before air-run kills the ranks of a stopping run (its
    ``--grace-period`` from the signal), or None while no stop was asked."""
    progress = _progress()
    return None if progress is None else progress.stop_deadline()


def stop_step():
    """The step every rank stops at, once a stop was asked; else None."""
    progress = _progress()
    return None if progress is None else progress.stop_step()


def steps():
    """The training steps air-run has counted on this rank so far (0 outside
    air-run). It goes on from the step of the checkpoint ``air.data.load()``
    loaded (see set_steps), so ``air.data.save(..., step=air.steps())`` habits
    and the stop step count the run's steps, not this launch's."""
    progress = _progress()
    return 0 if progress is None else progress.steps


def set_steps(n):
    """Sets this rank's step count to `n` (later steps count on from it),
    for a loop that restores its step from a checkpoint of its own.
    ``air.data.load()`` does it by itself with the count its checkpoint
    recorded at ``air.data.save()``. Does nothing outside air-run."""
    progress = _progress()
    if progress is not None:
        progress.set_steps(n)

"""Exceptions raised in the caller when a distributed call fails."""

import pickle


class DistributedError(RuntimeError):
    """A distributed call failed: one exception for the whole run.

    Attributes:
        rank: the rank that failed first (the root cause), or None when no rank
            is to blame (air-run itself could not start the ranks, was
            interrupted, ...).
        exc_type: the remote exception's type name ("ValueError"), or None when
            the rank died without raising (killed by a signal, os._exit, ...).
        message: the remote exception's message, or air-run's reason.
        remote_traceback: the formatted traceback from the failing rank ("" when
            none is known); also part of str(error).
        partial_results: one entry per rank, in rank order: the return value of
            every rank that finished, None where a rank failed or was stopped.
        exit_code: air-run's exit code (the failing rank's code, 128+N for a
            signal, 124 for a timeout, ...).
        summary: air-run's JSON summary as a dict (empty when none was written).
        exception: the remote exception object itself when it could be
            unpickled in the caller, else None.
    """

    def __init__(self, headline, *, rank=None, exc_type=None, message="",
                 remote_traceback="", partial_results=None, exit_code=None,
                 summary=None, exception=None):
        self.headline = headline
        self.rank = rank
        self.exc_type = exc_type
        self.message = message
        self.remote_traceback = remote_traceback or ""
        self.partial_results = list(partial_results or [])
        self.exit_code = exit_code
        self.summary = summary or {}
        self.exception = exception
        super().__init__(headline)

    def __str__(self):
        text = self.headline
        if self.remote_traceback:
            where = "rank %s" % self.rank if self.rank is not None else "the failing rank"
            text += "\n\nTraceback from %s:\n%s" % (where, self.remote_traceback.rstrip("\n"))
        return text

    def __reduce__(self):
        # Keep the attributes when the error itself is pickled (e.g. by a
        # multiprocessing pool or a nested air call).
        return (_rebuild_error, (type(self), self.headline, self.__dict__.copy()))


class DistributedTimeout(DistributedError):
    """The run exceeded its timeout; air-run stopped every rank (exit code 124)."""


class SerializationError(pickle.PicklingError):
    """The function or its arguments could not be sent to the ranks.

    Raised in the caller before anything is launched: the payload could not be
    pickled, or it is larger than the limit (AIR_MAX_PAYLOAD_BYTES, default
    512 MiB). Load large data inside the decorated function instead of
    capturing it or passing it as an argument.
    """


def mark_for_caller(error):
    """Marks an exception as one the caller is to read (a refused spec...):
    like DistributedError and SerializationError, it is raised from the
    caller's call without air's own frames below it (see for_caller)."""
    error._air_for_caller = True
    return error


def for_caller(error):
    """Whether `error` is one of air's answers to the caller, as opposed to a
    fault inside air, whose frames matter."""
    return isinstance(error, (DistributedError, SerializationError)) or \
        getattr(error, "_air_for_caller", False)


def _rebuild_error(cls, headline, state):
    error = cls.__new__(cls)
    RuntimeError.__init__(error, headline)
    error.__dict__.update(state)
    return error

"""Serialisation of the call (function, args, kwargs) and of per-rank outcomes.

The payload file holds two pickles one after the other: a small header written
with the standard pickle (interpreter facts the worker needs before it can load
the rest, notably the caller's sys.path), then the body (callable, args,
kwargs) written with cloudpickle when it is importable, so functions defined in
``__main__`` or a notebook travel by value; otherwise with pickle, by reference.
"""

import dis
import os
import pickle
import sys
import types

try:  # Optional: Debian's python3-cloudpickle, or pip's cloudpickle.
    import cloudpickle as _cloudpickle
except ImportError:  # pragma: no cover - depends on the interpreter
    _cloudpickle = None

from air._errors import SerializationError

DEFAULT_PAYLOAD_LIMIT = 512 * 1024 * 1024
PROTOCOL = pickle.HIGHEST_PROTOCOL
FORMAT = 1

_ADVICE = ("Load or build large data (datasets, models, tensors) inside the decorated function, "
           "for example by reading it from a file there, instead of capturing it in a global or "
           "passing it as an argument.")


def serializer_name():
    """'cloudpickle' when available, else 'pickle'."""
    return "cloudpickle" if _cloudpickle is not None else "pickle"


def payload_limit():
    """Largest payload in bytes: $AIR_MAX_PAYLOAD_BYTES, default 512 MiB."""
    text = os.environ.get("AIR_MAX_PAYLOAD_BYTES", "")
    if not text:
        return DEFAULT_PAYLOAD_LIMIT
    try:
        value = int(text)
    except ValueError:
        raise ValueError("AIR_MAX_PAYLOAD_BYTES must be a number of bytes, got %r" % text)
    if value <= 0:
        raise ValueError("AIR_MAX_PAYLOAD_BYTES must be positive, got %r" % text)
    return value


class _MainByReference(Exception):
    pass


class _ReferencePickler(pickle.Pickler):
    """The standard pickler, refusing what it would send by a reference the
    ranks cannot resolve: functions and classes of ``__main__`` (the ranks'
    ``__main__`` is the worker, not the caller's script or notebook)."""

    def persistent_id(self, obj):
        if isinstance(obj, (types.FunctionType, type)) and \
                getattr(obj, "__module__", None) == "__main__":
            raise _MainByReference(getattr(obj, "__qualname__", repr(obj)))
        return None


def _pickler(file):
    if _cloudpickle is not None:
        return _cloudpickle.CloudPickler(file, protocol=PROTOCOL)
    return _ReferencePickler(file, protocol=PROTOCOL)


class _TooLarge(Exception):
    pass


class _LimitedWriter:
    """File wrapper that stops a pickle as soon as it passes the limit, so an
    oversized payload is refused without being built in memory first."""

    def __init__(self, file, limit):
        self.file = file
        self.limit = limit
        self.written = 0

    def write(self, data):
        self.written += len(data)
        if self.written > self.limit:
            raise _TooLarge()
        return self.file.write(data)


def _human(n):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if unit == "bytes" else ("%.0f %s" % (n, unit))
        n /= 1024.0


def _code_objects(code):
    """`code` and every code object nested in it (inner functions, lambdas,
    comprehensions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _module_of(value):
    """The top-level package a value comes from ('torch' for torch.nn, for
    nn.Linear and for a tensor), or None for builtins and plain data."""
    try:
        if isinstance(value, types.ModuleType):
            name = value.__name__
        else:
            name = getattr(value, "__module__", None) or getattr(type(value), "__module__", None)
    except Exception:  # a proxy whose attributes raise: it names no package
        return None
    if not isinstance(name, str) or name in ("builtins", "__main__"):
        return None
    return name.split(".")[0]


def target_modules(target, args=(), kwargs=None):
    """The top-level packages a call uses, as far as its code shows: the
    modules, classes and functions its globals and closure name (in nested
    functions too) and the types of its arguments. Sorted. air-run's warm
    start reads them (AIR_RUN_TARGET_MODULES): a call that uses torch gets
    ranks forked from an interpreter that imported it, as a script that
    imports torch does. A best effort that never fails the call: a module
    imported inside the function counts too (`import torch` in its body), one
    reached only through another module's code does not."""
    fn = getattr(target, "_fn", target)  # a @distributed wrapper: its function
    fn = getattr(fn, "__func__", fn)  # a bound method: its function
    found = set()
    code = getattr(fn, "__code__", None)
    if code is not None:
        scope = getattr(fn, "__globals__", {})
        for each in _code_objects(code):
            for name in each.co_names:
                if name in scope:
                    found.add(_module_of(scope[name]))
            for instruction in dis.get_instructions(each):
                if instruction.opname == "IMPORT_NAME":  # `import torch` inside the function
                    found.add(str(instruction.argval).split(".")[0] or None)
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                found.add(_module_of(cell.cell_contents))
            except ValueError:  # an empty cell
                pass
    for value in list(args) + list((kwargs or {}).values()):
        found.add(_module_of(value))
    found.discard(None)
    return sorted(found)


def dump_call(path, target, args, kwargs, what):
    """Writes the payload for calling target(*args, **kwargs) on every rank.

    Raises SerializationError (before anything is launched) when the call
    cannot be pickled or is larger than payload_limit(); `what` names the
    function in the message.
    """
    limit = payload_limit()
    header = {
        "format": FORMAT,
        "air_version": _air_version(),
        "serializer": serializer_name(),
        "sys_path": [p for p in sys.path if isinstance(p, str)],
        "what": what,
    }
    with open(path, "wb") as f:
        pickle.dump(header, f, protocol=PROTOCOL)
        writer = _LimitedWriter(f, limit)
        try:
            _pickler(writer).dump((target, tuple(args), dict(kwargs)))
        except _TooLarge:
            raise SerializationError(
                "air: %s and its arguments are too large to send to the ranks (more than %s "
                "pickled; the limit is AIR_MAX_PAYLOAD_BYTES). %s" % (what, _human(limit), _ADVICE)
            ) from None
        except _MainByReference as e:
            raise SerializationError(
                "air: %s uses %s, defined in __main__ (a script or notebook); without "
                "cloudpickle it cannot be sent to the ranks. Install cloudpickle (Debian: "
                "python3-cloudpickle), or move it to an importable module."
                % (what, e.args[0])) from None
        except (OverflowError, MemoryError) as e:
            raise SerializationError(
                "air: %s and its arguments are too large to pickle (%s: %s). %s"
                % (what, type(e).__name__, e, _ADVICE)
            ) from e
        except RecursionError as e:
            raise SerializationError(
                "air: could not pickle %s or its arguments: too deeply nested (%s)." % (what, e)
            ) from e
        except (pickle.PicklingError, TypeError, AttributeError, ValueError) as e:
            hint = ""
            if _cloudpickle is None:
                hint = (" cloudpickle is not installed, so functions are sent by reference: "
                        "define the function at the top level of an importable module, or "
                        "install cloudpickle.")
            raise SerializationError(
                "air: could not pickle %s or its arguments with %s: %s: %s.%s Objects such as "
                "open files, locks, sockets, data loaders or database connections cannot be "
                "sent; create them inside the decorated function." % (
                    what, serializer_name(), type(e).__name__, e, hint)
            ) from e


def load_call(path):
    """Reads a payload: extends sys.path with the caller's entries, then returns
    (header, target, args, kwargs)."""
    with open(path, "rb") as f:
        header = pickle.load(f)
        if header.get("format") != FORMAT:
            raise RuntimeError("air: payload format %r is not supported by this worker (%s)"
                               % (header.get("format"), _air_version()))
        for entry in header.get("sys_path", []):
            if entry not in sys.path:
                sys.path.append(entry)
        target, args, kwargs = pickle.load(f)
    return header, target, args, kwargs


def dumps_outcome(outcome):
    """Pickles a rank outcome dict (any picklable value inside)."""
    if _cloudpickle is not None:
        return _cloudpickle.dumps(outcome, protocol=PROTOCOL)
    return pickle.dumps(outcome, protocol=PROTOCOL)


def _air_version():
    from air import __version__
    return __version__

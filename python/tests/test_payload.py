"""Serialisation limits and errors: clear messages before anything runs."""

import collections as coll
import json as js
import os
import threading
from decimal import Decimal

import pytest

import air
from air._payload import dump_call, payload_limit, target_modules, DEFAULT_PAYLOAD_LIMIT


def test_default_limit_is_512_mib(monkeypatch):
    monkeypatch.delenv("AIR_MAX_PAYLOAD_BYTES", raising=False)
    assert payload_limit() == DEFAULT_PAYLOAD_LIMIT == 512 * 1024 * 1024


def test_bad_limit_is_refused(monkeypatch):
    monkeypatch.setenv("AIR_MAX_PAYLOAD_BYTES", "lots")
    with pytest.raises(ValueError, match="AIR_MAX_PAYLOAD_BYTES must be a number of bytes, "
                                         "got 'lots'"):
        payload_limit()


def test_too_large_payload_is_refused_without_writing_it(tmp_path, monkeypatch):
    monkeypatch.setenv("AIR_MAX_PAYLOAD_BYTES", str(1024 * 1024))
    data = b"x" * (3 * 1024 * 1024)
    path = tmp_path / "payload.pkl"
    with pytest.raises(air.SerializationError) as info:
        dump_call(str(path), len, (data,), {}, "function train")
    message = str(info.value)
    assert message.startswith("air: function train and its arguments are too large to send to "
                              "the ranks (more than 1 MiB pickled; the limit is "
                              "AIR_MAX_PAYLOAD_BYTES). Load or build large data")
    assert "inside the decorated function" in message
    assert path.stat().st_size <= 1024 * 1024


def test_too_large_through_distributed(monkeypatch):
    """The caller gets the error before air-run is even looked for."""
    monkeypatch.setenv("AIR_MAX_PAYLOAD_BYTES", "100000")
    monkeypatch.setenv("AIR_RUN_BINARY", "/nonexistent/air-run")
    big = list(range(100000))

    @air.distributed(num_accelerators=2)
    def train():
        return len(big)

    with pytest.raises(air.SerializationError, match="too large to send to the ranks"):
        train.distributed()
    assert train() == 100000  # a plain call still runs here


def test_unpicklable_argument(tmp_path):
    with pytest.raises(air.SerializationError) as info:
        dump_call(str(tmp_path / "p.pkl"), len, (threading.Lock(),), {}, "function train")
    message = str(info.value)
    assert "air: could not pickle function train or its arguments with " in message
    assert "cannot pickle '_thread.lock' object" in message
    assert message.endswith("create them inside the decorated function.")
    assert isinstance(info.value.__cause__, TypeError)


def top_level(x):
    return x + 1


def test_without_cloudpickle_main_functions_are_refused(tmp_path, monkeypatch):
    from air import _payload
    monkeypatch.setattr(_payload, "_cloudpickle", None)

    def notebook_fn():
        pass

    notebook_fn.__module__ = "__main__"
    notebook_fn.__qualname__ = "notebook_fn"
    with pytest.raises(air.SerializationError) as info:
        dump_call(str(tmp_path / "p.pkl"), notebook_fn, (), {}, "function notebook_fn")
    assert str(info.value) == (
        "air: function notebook_fn uses notebook_fn, defined in __main__ (a script or "
        "notebook); without cloudpickle it cannot be sent to the ranks. Install cloudpickle "
        "(Debian: python3-cloudpickle), or move it to an importable module.")
    # Importable functions still travel by reference.
    dump_call(str(tmp_path / "ok.pkl"), top_level, (1,), {}, "function top_level")
    header, target, args, kwargs = _payload.load_call(str(tmp_path / "ok.pkl"))
    assert header["serializer"] == "pickle"
    assert (target, args, kwargs) == (top_level, (1,), {})


def test_target_modules_names_what_a_call_uses():
    # For the warm start (AIR_RUN_TARGET_MODULES): modules, classes and
    # functions named by the code, nested code, the closure and the arguments.
    def globals_by_alias():
        return js.dumps(coll.OrderedDict())

    def nested_and_inside():
        import email.message
        return [Decimal(x) for x in "12"], email.message

    seen = threading.Lock()

    def closure():
        return seen

    assert target_modules(globals_by_alias) == ["collections", "json"]
    assert target_modules(nested_and_inside) == ["decimal", "email"]
    assert target_modules(closure) == ["_thread"]
    assert target_modules(lambda x: x + 1, (1, "a"), {"b": 2.0}) == []  # builtins name no package
    assert target_modules(lambda x: x, (Decimal(1),)) == ["decimal"]
    assert target_modules(air.distributed(globals_by_alias)) == ["collections", "json"]  # the wrapper's function

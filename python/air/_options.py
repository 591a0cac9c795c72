"""Checks of @distributed's arguments, made when the function is decorated.

A mistake in an argument is reported at the decorator, naming the Python
argument (``timeout=``), before anything is pickled or launched, rather than
later as air-run's complaint about one of its command-line flags.
"""

import math
import os
import re

# air-run's duration grammar (core/base/duration.cpp): a bare number of
# seconds, or parts with units in decreasing order ("1h30m", "1.5s", "500ms").
_NUMBER = r"(\d+(?:\.\d+)?|\.\d+)"
_PART = re.compile(_NUMBER + r"(ms|h|m|s)")
_BARE = re.compile(_NUMBER)
_UNIT_MS = {"h": 3600 * 1000, "m": 60 * 1000, "s": 1000, "ms": 1}
_MAX_MS = 8760 * 3600 * 1000  # air-run's limit: one year


def duration_ms(text):
    """Milliseconds of a duration string as air-run reads it, or None when
    air-run would refuse it."""
    if _BARE.fullmatch(text):
        parts = [(text, "s")]
    else:
        parts, position = [], 0
        while position < len(text):
            match = _PART.match(text, position)
            if match is None:
                return None
            parts.append((match.group(1), match.group(2)))
            position = match.end()
        if not parts:
            return None
    total, previous = 0, None
    for number, unit in parts:
        whole, _, fraction = number.partition(".")
        if len(whole) > 9 or len(fraction) > 9:
            return None
        if previous is not None and _UNIT_MS[unit] >= _UNIT_MS[previous]:
            return None
        previous = unit
        total += int(float(number) * _UNIT_MS[unit])
    return total if total <= _MAX_MS else None


def duration_text(value, name, allow_none):
    """The text air-run gets for a duration argument (seconds rounded up, or
    the string as written); raises TypeError / ValueError naming `name`."""
    accepted = "a number of seconds, a duration string like '90m' or '1h30m'" + (
        ", or None" if allow_none else "")
    if value is None:
        if allow_none:
            return "none"
        raise TypeError("%s must be %s, not None" % (name, accepted))
    if isinstance(value, bool):
        raise TypeError("%s must be %s, not %r" % (name, accepted, value))
    if isinstance(value, str):
        text = value.strip()
        if allow_none and text == "none":
            return text
        ms = duration_ms(text)
        if ms is None:
            raise ValueError("%s must be %s; got %r" % (name, accepted, value))
        if ms == 0:
            raise ValueError("%s must be a positive duration, got %r" % (name, value))
        return text
    if hasattr(value, "total_seconds"):  # datetime.timedelta
        value = value.total_seconds()
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise TypeError("%s must be %s, not %r" % (name, accepted, value))
    if not seconds > 0 or math.isinf(seconds):
        raise ValueError("%s must be a positive number of seconds%s, got %r"
                         % (name, " (or None to disable)" if allow_none else "", value))
    if seconds * 1000 > _MAX_MS:
        raise ValueError("%s is too long: at most 8760 hours, got %r" % (name, value))
    return str(int(math.ceil(seconds)))


def check_env(env):
    """A copy of `env` as a dict of str to str; raises TypeError naming env=."""
    if env is None:
        return {}
    try:
        items = dict(env).items()
    except (TypeError, ValueError):
        raise TypeError("env must be a dict of environment variables (str to str), not %r"
                        % (env,))
    checked = {}
    for key, value in items:
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise TypeError("env: %r is not an environment variable name" % (key,))
        if not isinstance(value, str):
            raise TypeError("env[%r] must be a str, not %r (write str(...) to pass it)"
                            % (key, value))
        if "\0" in value:
            raise ValueError("env[%r] contains a NUL byte" % key)
        checked[key] = value
    return checked


def check_python(python):
    """The ranks' interpreter: None (this one) or a path / command name."""
    if python is None:
        return None
    if not isinstance(python, (str, os.PathLike)):
        raise TypeError("python must be the path of an interpreter (str), not %r" % (python,))
    text = os.fspath(python)
    if not text.strip():
        raise ValueError("python must not be empty")
    return text


_GPU_TYPE = re.compile(r"GPU_(\d+)X([A-Z][A-Z0-9]*)")
_LEGACY_MODEL = re.compile(r"[A-Z]+[0-9][A-Z0-9]*")


def check_accelerator_type(text):
    """Raises ValueError naming accelerator_type= when air-run would refuse
    the text's form ("CPU", "GPU_<n>x<MODEL>", or a bare model such as
    "H100"); whether this machine has it is air-run's to check, at the call."""
    if text is None:
        return None
    up = text.upper()
    if up == "CPU" or _LEGACY_MODEL.fullmatch(up):
        return text
    match = _GPU_TYPE.fullmatch(up)
    if match is None:
        raise ValueError("accelerator_type must be 'CPU' or 'GPU_<n>x<MODEL>' (like "
                         "'GPU_8xH100'), got %r" % (text,))
    count = int(match.group(1))
    if count < 1 or count > 9999:
        raise ValueError("accelerator_type: the GPU count must be between 1 and 9999, got %r"
                         % (text,))
    return text

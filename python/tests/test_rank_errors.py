"""The rank shim's exception recorder (core/run/python/air_run_errors.py),
run in a fresh interpreter as a rank's start-up runs it: what reaches the
error file, what the rank prints, and what is left alone."""

import json
import os
import textwrap

from conftest import run_python, subprocess_env

ERRORS_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "core", "run", "python",
                         "air_run_errors.py")


def run_rank(tmp_path, body, pgid_leader=True):
    """Runs `body` after the recorder is armed, as a rank (its own process
    group); returns (completed process, the error file's record or None)."""
    error_file = tmp_path / "error.json"
    script = tmp_path / "rank.py"
    script.write_text("import os, sys\n"
                      + ("os.setpgid(0, 0)\n" if pgid_leader else "")
                      + "exec(compile(open(%r).read(), 'air_run_errors.py', 'exec'))\n" % ERRORS_PY
                      + "_air_run_record_errors()\n"
                      + textwrap.dedent(body))
    env = subprocess_env()
    env["TORCHELASTIC_ERROR_FILE"] = str(error_file)
    done = run_python([str(script)], env=env, cwd=str(tmp_path))
    record = json.loads(error_file.read_text()) if error_file.exists() else None
    return done, record


def test_an_uncaught_exception_is_recorded_and_printed_as_before(tmp_path):
    done, record = run_rank(tmp_path, """
        def train():
            raise RuntimeError("injected failure")
        train()
        """)
    assert done.returncode == 1
    assert "Traceback (most recent call last):" in done.stderr
    assert done.stderr.rstrip().endswith("RuntimeError: injected failure")
    assert record["message"]["message"] == "RuntimeError: injected failure"
    stack = record["message"]["extraInfo"]["py_callstack"]
    assert "in train" in stack and stack.rstrip().endswith("RuntimeError: injected failure")
    assert int(record["message"]["extraInfo"]["timestamp"]) > 0


def test_a_module_qualified_type_as_python_prints_it(tmp_path):
    _, record = run_rank(tmp_path, """
        import json
        json.loads("{")
        """)
    assert record["message"]["message"].startswith("json.decoder.JSONDecodeError: ")


def test_a_hook_that_replaces_it_without_chaining(tmp_path):
    """A library's hook that calls no other: the exit-time fallback records."""
    done, record = run_rank(tmp_path, """
        sys.excepthook = lambda *a: print("library hook", file=sys.stderr)
        raise ValueError("under a library hook")
        """)
    assert done.stderr.strip() == "library hook"
    assert record["message"]["message"] == "ValueError: under a library hook"


def test_a_hook_that_wraps_it_like_torch(tmp_path):
    done, record = run_rank(tmp_path, """
        import io
        old = sys.excepthook
        def wrapped(*args):
            saved, sys.stderr = sys.stderr, io.StringIO()
            try:
                old(*args)
            finally:
                buf, sys.stderr = sys.stderr, saved
            sys.stderr.write("".join("[rank1]: " + l for l in buf.getvalue().splitlines(True)))
        sys.excepthook = wrapped
        raise KeyError("k")
        """)
    assert "[rank1]: KeyError: 'k'" in done.stderr
    assert record["message"]["message"] == "KeyError: 'k'"


def test_sys_exit_with_a_message(tmp_path):
    done, record = run_rank(tmp_path, 'sys.exit("no config")\n')
    assert done.returncode == 1 and done.stderr.strip() == "no config"
    assert record["message"]["message"] == "SystemExit: no config"


def test_what_is_not_recorded(tmp_path):
    # An exit code, a thread's exception, KeyboardInterrupt. (A caught
    # sys.exit("message") leaves its record, which air-run ignores for a rank
    # that exits 0: tests/e2e/test_rank_exceptions.sh.)
    for body in ("sys.exit(3)\n",
                 "import threading\nt = threading.Thread(target=lambda: 1 / 0)\nt.start(); t.join()\n",
                 "raise KeyboardInterrupt\n"):
        done, record = run_rank(tmp_path, body)
        assert record is None, body
    assert "ZeroDivisionError" not in (run_rank(tmp_path, "print('ok')\n")[0].stderr)


def test_an_existing_file_is_kept(tmp_path):
    """torch's @record writes first; its record stays."""
    done, record = run_rank(tmp_path, """
        with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as f:
            f.write('{"message": "ValueError: from record"}')
        raise RuntimeError("later")
        """)
    assert record == {"message": "ValueError: from record"}


def test_not_from_a_process_that_is_not_the_rank(tmp_path):
    """A forked worker or a subprocess (not its group's leader) writes nothing."""
    _, record = run_rank(tmp_path, "raise RuntimeError('in a worker')\n", pgid_leader=False)
    assert record is None or os.getpgid(0) == os.getpid()


def test_a_base_exception_is_recorded(tmp_path):
    """DCP's CheckpointException derives from BaseException, not Exception."""
    _, record = run_rank(tmp_path, """
        class CheckpointException(BaseException):
            pass
        raise CheckpointException("rank 1 failed to write")
        """)
    assert record["message"]["message"] == "CheckpointException: rank 1 failed to write"
    for n, body in enumerate(("raise KeyboardInterrupt\n", "sys.exit(0)\n", "raise SystemExit\n")):
        (tmp_path / str(n)).mkdir()
        assert run_rank(tmp_path / str(n), body)[1] is None, body


def test_a_file_name_that_is_not_utf8_survives(tmp_path):
    # A library that names the path as the file system gave it (latin-1 bytes
    # reach Python as surrogate escapes).
    done, record = run_rank(tmp_path, """
        raise FileNotFoundError("no such file: " + os.fsdecode(b"caf\\xe9.csv"))
        """)
    text = (tmp_path / "error.json").read_bytes().decode("utf-8")  # strict: valid UTF-8
    assert "\\udc" not in text  # no surrogate escape, which air-run's JSON reader refuses
    message = record["message"]["message"]
    assert message == "FileNotFoundError: no such file: caf\\xe9.csv"


def test_a_huge_message_keeps_its_head_and_tail_and_says_it_was_cut(tmp_path):
    """3 MiB, written twice (headline and traceback), went over air-run's
    4 MiB limit for the error file, and the exception was lost."""
    _, record = run_rank(tmp_path, """
        raise ValueError("HEAD" + "x" * (3 * 1024 * 1024) + "TAIL")
        """)
    assert (tmp_path / "error.json").stat().st_size < 1024 * 1024
    message = record["message"]["message"]
    assert message.startswith("ValueError: HEADxxx") and message.endswith("xxxTAIL")
    assert "characters cut here]" in message
    stack = record["message"]["extraInfo"]["py_callstack"]
    assert stack.startswith("Traceback (most recent call last):") and stack.rstrip().endswith("TAIL")

#!/usr/bin/env bash
# A Python rank's exception, exactly, with no change to the script: the rank
# shim records what a rank dies of into its error file, so the summary's
# error, the reason, the console's headline, JUnit and the annotations name
# it, whatever the rank printed before and whichever excepthook is installed.
# torch 2.3+'s init_process_group wraps sys.excepthook to put "[rankN]: "
# before every line; the CPU machines' torch 1.13 does not, so
# torch_hook.py below does what torch's hook does (checked against a real
# torch 2.11 by scripts/gpu-suite.sh). Plain python3 ranks: no torch needed.
source "$(dirname "$0")/lib.sh"

# The error as the summary has it, for rank 1: "type|message|source".
rank1_error() {
  json_get "$1" '"|".join(str(d["ranks"][1]["error"][k]) for k in ("type", "message", "source"))'
}
reason() { json_get "$1" 'd["outcome"]["reason"]'; }

# crash.py: rank 1 raises RuntimeError at step 8 (line 8); rank 0 waits
# to be stopped.
write_crash() {
  cat >crash.py <<'PY'
import os, sys, time
import torch_hook  # noqa: F401  (a no-op unless AIR_TEST_TORCH_HOOK is set)

def train(step):
    if os.environ["RANK"] == "0":
        time.sleep(60)
    if step == 8:
        raise RuntimeError(f"injected failure at step {step}")

for s in range(10):
    train(s)
PY
  # What torch 2.3+'s init_process_group does to sys.excepthook (its
  # _distributed_excepthook): the hook before it runs with stderr captured,
  # and every line it printed gets "[rankN]: " before it.
  cat >torch_hook.py <<'PY'
import io, os, sys

if os.environ.get("AIR_TEST_TORCH_HOOK"):
    old_hook = sys.excepthook
    prefix = "[rank%s]" % os.environ["RANK"]

    def _distributed_excepthook(*args):
        old_stderr = sys.stderr
        sys.stderr = buf = io.StringIO()
        try:
            old_hook(*args)
        finally:
            sys.stderr = old_stderr
        msg = buf.getvalue()
        msg = "\n".join(f"{prefix}: {s}" if s != "" else "" for s in msg.split("\n"))
        sys.stderr.write(msg)
        sys.stderr.flush()

    sys.excepthook = _distributed_excepthook
PY
}

expect_crash_named() { # expect_crash_named SUMMARY
  expect_rc 1
  expect_eq "$(rank1_error "$1")" "RuntimeError|injected failure at step 8|error_file"
  expect_eq "$(reason "$1")" "rank 1 failed: RuntimeError: injected failure at step 8 (crash.py:8)"
  expect_contains "$err" "failed after"
  expect_contains "$err" "(exit code 1): rank 1 failed: RuntimeError: injected failure at step 8 (crash.py:8)"
  expect_contains "$(json_get "$1" 'd["ranks"][1]["error"]["traceback"]')" 'File "'"$TESTDIR"'/crash.py", line 8, in train'
}

test_a_plain_raise_is_named() {
  write_crash
  run_air --accelerator-type CPU -n 2 --summary s.json --junit j.xml crash.py
  expect_crash_named s.json
  expect_contains "$(cat j.xml)" 'message="RuntimeError: injected failure at step 8 (exit code 1)" type="RuntimeError"'
  # The rank's own output is as it was: the traceback, once.
  expect_eq "$(grep -c '^\[rank1\]: Traceback (most recent call last):' "$TESTDIR/stderr")" "1"
}

test_torch_style_prefix_is_shown_once_and_named() {
  write_crash
  AIR_TEST_TORCH_HOOK=1 run_air --accelerator-type CPU -n 2 --summary s.json --log-dir logs crash.py
  expect_crash_named s.json
  expect_contains "$err" "[rank1]: Traceback (most recent call last):"
  expect_not_contains "$err" "[rank1]: [rank1]:"
  expect_contains "$err" "[rank1]: RuntimeError: injected failure at step 8"
  # The log file keeps the rank's bytes: torch's prefix, as it printed it.
  local log
  log=$(json_get s.json 'd["ranks"][1]["log"]')
  expect_contains "$(cat "$log")" "[rank1]: RuntimeError: injected failure at step 8"
  # The report's tail reads without it.
  expect_contains "$err" "      RuntimeError: injected failure at step 8"
}

test_a_real_torch_rank_after_init_process_group() {
  # The real thing: torch 2.3+ (the GPU machine's 2.11, Debian 13's 2.6)
  # wraps sys.excepthook in init_process_group; torch 1.13 does not.
  "$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null || { echo "skip: no torch"; return 0; }
  cat >real.py <<'PY'
import os, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    raise ValueError("bad batch 42")
time.sleep(60)
PY
  run_air --accelerator-type CPU -n 2 --python "$TORCH_PYTHON" --summary s.json real.py
  expect_rc 1
  expect_eq "$(rank1_error s.json)" "ValueError|bad batch 42|error_file"
  expect_eq "$(reason s.json)" "rank 1 failed: ValueError: bad batch 42 (real.py:5)"
  expect_eq "$(grep -c '^\[rank1\]: Traceback (most recent call last):' "$TESTDIR/stderr")" "1"
  expect_not_contains "$err" "[rank1]: [rank1]:"
  echo "  torch $("$TORCH_PYTHON" -c 'import torch; print(torch.__version__)'): $(grep -m1 'ValueError' "$TESTDIR/stderr")"
}

test_torch_style_prefix_in_the_output_tail_fallback() {
  # Not Python-recorded (the shim is off): the tail, read without torch's
  # prefix, still gives the exception's type.
  write_crash
  AIR_TEST_TORCH_HOOK=1 run_air --accelerator-type CPU -n 2 --summary s.json --no-python \
    python3 -S crash.py
  expect_rc 1
  expect_eq "$(rank1_error s.json)" "RuntimeError|exit code 1|output_tail"
  expect_not_contains "$err" "[rank1]: [rank1]:"
}

test_the_output_tail_fallback_after_a_carriage_return_bar() {
  # No shim (python3 -S): the tail stands in. The bar's last state, then the
  # traceback's header on a line of its own.
  cat >tailbar.py <<'PY'
import os, sys
if os.environ["RANK"] == "1":
    for i in range(6):
        sys.stderr.write("\r%3d%%|%-5s| %d/10" % (i * 10, "#" * i, i))
        sys.stderr.flush()
    raise RuntimeError("boom at step 5")
PY
  run_air --accelerator-type CPU -n 2 --summary s.json --no-python python3 -S tailbar.py
  expect_rc 1
  expect_eq "$(rank1_error s.json)" "RuntimeError|exit code 1|output_tail"
  expect_eq "$(json_get s.json '(lambda l: l[l.index("Traceback (most recent call last):") - 1].endswith(" 50%|#####| 5/10"))(d["ranks"][1]["error"]["traceback"].split("\n"))')" \
    "True"
}

test_after_a_carriage_return_bar_and_8_mib_of_output() {
  write_crash
  cat >bar.py <<'PY'
import os, sys
if os.environ["RANK"] == "1":
    for _ in range(8 * 1024):
        sys.stdout.write("y" * 1023 + "\n")
    for i in range(50):
        sys.stderr.write("\r %3d%%|%s|" % (2 * i, "#" * (i // 5)))
    sys.stderr.flush()
exec(compile(open("crash.py").read(), os.path.abspath("crash.py"), "exec"))
PY
  run_air --accelerator-type CPU -n 2 --summary s.json bar.py
  expect_rc 1
  expect_eq "$(rank1_error s.json)" "RuntimeError|injected failure at step 8|error_file"
  expect_eq "$(reason s.json)" "rank 1 failed: RuntimeError: injected failure at step 8 (crash.py:8)"
}

test_the_programs_own_hook_still_runs_and_the_exception_is_named() {
  # A hook that does not call the one it replaced (as some libraries do):
  # its output is the rank's, and the exception is still recorded.
  write_crash
  cat >own_hook.py <<'PY'
import os, sys
def quiet(kind, value, tb):
    print("own hook saw", kind.__name__, file=sys.stderr)
sys.excepthook = quiet
exec(compile(open("crash.py").read(), os.path.abspath("crash.py"), "exec"))
PY
  run_air --accelerator-type CPU -n 2 --summary s.json own_hook.py
  expect_rc 1
  expect_contains "$err" "[rank1]: own hook saw RuntimeError"
  expect_not_contains "$err" "[rank1]: Traceback"
  expect_eq "$(rank1_error s.json)" "RuntimeError|injected failure at step 8|error_file"
}

test_sys_exit_with_a_message() {
  cat >bye.py <<'PY'
import os, sys, time
if os.environ["RANK"] == "0":
    time.sleep(60)
sys.exit("config has no 'lr'")
PY
  run_air --accelerator-type CPU -n 2 --summary s.json bye.py
  expect_rc 1
  expect_eq "$(rank1_error s.json)" "SystemExit|config has no 'lr'|error_file"
  expect_eq "$(reason s.json)" "rank 1 failed: SystemExit: config has no 'lr' (bye.py:4)"
  expect_contains "$err" "[rank1]: config has no 'lr'"
}

test_a_caught_sys_exit_is_no_failure() {
  cat >caught.py <<'PY'
import sys
try:
    sys.exit("not now")
except SystemExit:
    pass
PY
  run_air --accelerator-type CPU -n 2 --summary s.json caught.py
  expect_rc 0
  expect_eq "$(json_get s.json '[r["error"] for r in d["ranks"]]')" "[None, None]"
}

test_an_exception_in_a_thread_leaves_the_rank_as_it_was() {
  # A thread's exception ends the thread, not the rank: exit 0, no error,
  # Python's own report of it still printed.
  cat >thread.py <<'PY'
import threading
def work():
    raise ValueError("in a thread")
t = threading.Thread(target=work)
t.start(); t.join()
print("main goes on")
PY
  run_air --accelerator-type CPU -n 2 --summary s.json thread.py
  expect_rc 0
  expect_contains "$err" "ValueError: in a thread"
  expect_contains "$out" "[rank1]: main goes on"
  expect_eq "$(json_get s.json '[r["error"] for r in d["ranks"]]')" "[None, None]"
}

test_a_record_decorated_rank_keeps_its_own_file() {
  # torch's @record writes the file before the exception leaves the script;
  # the shim leaves it be. Emulated: a script that writes a record itself.
  cat >own_record.py <<'PY'
import json, os, time
if os.environ["RANK"] == "0":
    time.sleep(60)
with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as f:
    json.dump({"message": {"message": "ValueError: from record",
                           "extraInfo": {"py_callstack": "tb", "timestamp": "1"}}}, f)
raise RuntimeError("not this one")
PY
  run_air --accelerator-type CPU -n 2 --summary s.json own_record.py
  expect_rc 1
  expect_eq "$(rank1_error s.json)" "ValueError|from record|error_file"
  expect_eq "$(reason s.json)" "rank 1 failed: ValueError: from record"
}

test_a_rank_killed_by_a_signal_keeps_the_exit_reason() {
  cat >killed.py <<'PY'
import os, signal, time
if os.environ["RANK"] == "0":
    time.sleep(60)
os.kill(os.getpid(), signal.SIGKILL)
PY
  run_air --accelerator-type CPU -n 2 --summary s.json killed.py
  expect_rc 137
  expect_eq "$(reason s.json)" "rank 1 was killed by signal 9 (SIGKILL)"
}

test_warm_started_ranks_are_named_too() {
  write_crash
  run_air --accelerator-type CPU -n 2 --preload json --summary s.json crash.py
  expect_crash_named s.json
  cat >bye.py <<'PY'
import os, time
if os.environ["RANK"] == "0":
    time.sleep(60)
raise SystemExit("bare raise")
PY
  run_air --accelerator-type CPU -n 2 --preload json --summary s2.json bye.py
  expect_rc 1
  expect_eq "$(rank1_error s2.json)" "SystemExit|bare raise|error_file"
}

test_a_python_2_helper_started_by_a_rank_is_left_alone() {
  # The shim was the sitecustomize.py itself, Python 3 throughout: every
  # Python 2 a rank started printed "'import sitecustomize' failed".
  local py2
  for py2 in /root/.pyenv/versions/2.7*/bin/python2.7 "$(command -v python2.7)" ""; do
    [[ -n $py2 ]] && "$py2" -c 'import sys' 2>/dev/null && break
  done
  [[ -n $py2 ]] || { echo "skip: no python2.7 here"; return 0; }
  cat >helper.py <<PY
import subprocess, sys
done = subprocess.run(["$py2", "-c", "import sys; print('helper %d.%d' % sys.version_info[:2])"],
                      capture_output=True, text=True)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
raise RuntimeError("after the helper")
PY
  run_air --cpu-ranks 1 --python python3 helper.py
  expect_rc 1
  expect_contains "$out" "helper 2.7"
  expect_not_contains "$err" "sitecustomize"
  # and the shim still runs in the Python 3 rank: its exception is recorded
  expect_contains "$err" "rank 0 failed: RuntimeError: after the helper (helper.py:6)"
}

test_a_failed_collective_is_placed_at_the_programs_line() {
  # Every failed collective's reason ended "(sitecustomize.py:304)": the
  # shim's timing wrapper, a file deleted with the run; the annotation
  # pointed there too.
  "$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null || { echo "skip: no torch"; return 0; }
  cat >uneven2.py <<'PY'
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    os._exit(0)
t = torch.ones(1)
dist.all_reduce(t)
dist.all_reduce(t)
PY
  GITHUB_ACTIONS=true run_air --cpu-ranks 2 --python "$TORCH_PYTHON" uneven2.py
  expect_rc 1
  [[ $err =~ "rank 0 failed: RuntimeError: ".*" (uneven2.py:"[67]")" ]] || fail "reason: $(grep 'failed after' <<<"$err")"
  expect_contains "$out$err" "::error file=$PWD/uneven2.py,line="
  expect_not_contains "$out$err" "sitecustomize"
}

run_tests

#!/usr/bin/env bash
# The live status area under the rank output: only on a terminal (a real
# pseudo-terminal through util-linux script), never off one, never in CI, never
# tearing a rank line, and erased before air-run ends, whichever way it ends.
source "$(dirname "$0")/lib.sh"

# in_pty COMMAND: runs COMMAND in a pseudo-terminal, outside CI; its output in pty.out.
in_pty() {
  TERM=xterm-256color timeout 60 env -u CI script -qfec "$1" /dev/null >pty.out 2>&1 </dev/null
}

have_script() {
  command -v script >/dev/null || { echo "skip: no script(1)"; return 1; }
}

test_status_on_a_terminal_with_times_and_gpus() {
  have_script || return 0
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" in_pty "\"$AIR_RUN\" --timeout 1h --no-python sh -c 'echo hi \$RANK; sleep 1.5'"
  local text
  text=$(cat pty.out)
  expect_contains "$text" "air-run: 2 running, 0 exited, 0 failed | 00:0"
  expect_contains "$text" " elapsed | 59:5"
  expect_contains "$text" "gpu0 --% --/"
  expect_contains "$text" "gpu1 --% --/"
  expect_contains "$text" "hi 1"
}

test_never_off_a_terminal_in_ci_or_when_turned_off() {
  have_script || return 0
  local cmd=(--cpu-ranks 2 --no-python sh -c 'echo hi $RANK; sleep 0.6')
  run_air "${cmd[@]}"
  expect_rc 0
  expect_not_contains "$out$err" "running,"
  expect_not_contains "$out$err" $'\x1b'
  # Under a terminal, but CI is set, or the user said no.
  TERM=xterm timeout 60 env CI=true script -qfec "\"$AIR_RUN\" --cpu-ranks 2 --no-python sh -c 'sleep 0.6'" /dev/null \
    >pty.out 2>&1 </dev/null
  expect_not_contains "$(cat pty.out)" "running,"
  in_pty "\"$AIR_RUN\" --no-live --cpu-ranks 2 --no-python sh -c 'sleep 0.6'"
  expect_not_contains "$(cat pty.out)" "running,"
  AIR_RUN_LIVE=0 in_pty "\"$AIR_RUN\" --cpu-ranks 2 --no-python sh -c 'sleep 0.6'"
  expect_not_contains "$(cat pty.out)" "running,"
  NO_COLOR=1 in_pty "\"$AIR_RUN\" --cpu-ranks 2 --no-python sh -c 'sleep 0.6'"
  expect_not_contains "$(cat pty.out)" "running,"
  [[ $(cat pty.out) != *$'\x1b'* ]] || fail "NO_COLOR output holds escape codes: $(cat -v pty.out)"
}

# Every line on the terminal, once the area's erase sequences are taken as
# line breaks, is either a whole rank line or a whole status line: a redraw in
# the middle of a rank line would leave a line that is neither.
test_rank_lines_are_never_torn() {
  have_script || return 0
  cat >flood.sh <<'SH'
#!/bin/sh
i=1
end=$(( $(date +%s) + 2 ))
while [ "$(date +%s)" -lt $end ]; do
  j=0
  while [ $j -lt 50 ]; do echo "line $i of rank $RANK end"; i=$((i+1)); j=$((j+1)); done
done
SH
  chmod +x flood.sh
  in_pty "\"$AIR_RUN\" --cpu-ranks 4 --no-python ./flood.sh"
  /usr/bin/python3 - pty.out <<'PY' || fail "torn or missing lines (see above)"
import re, sys
data = open(sys.argv[1], "rb").read().decode()
statuses = data.count("running,")
data = re.sub(r"\x1b\[[0-9;]*m", "", data)  # colours: prefixes and the dimmed area
data = data.replace("\x1b[1A\x1b[2K", "\n").replace("\r\x1b[2K", "\n").replace("\r", "")
rank = re.compile(r"^\[rank(\d)\]: line (\d+) of rank (\d) end$")
status = re.compile(r"^air-run: \d+ running, \d+ exited, \d+ failed \| \d\d:\d\d elapsed( \| .*)?$")
seen = {}
bad = 0
partials = 0
for line in data.split("\n"):
    if not line or status.match(line) or line.startswith("air-run: ") and "running," not in line:
        continue
    m = rank.match(line)
    part = re.match(r"^\[rank(\d)\]: (.*)$", line)
    if not m and part:
        # An unfinished line is drawn in the status area until its end
        # arrives (ranks on a pty can be read mid-line); it is the start of
        # that rank's next line, and the whole line must still follow.
        r = int(part.group(1))
        if f"line {seen.get(r, 0) + 1} of rank {r} end".startswith(part.group(2)):
            partials += 1
            continue
    if not m or m.group(1) != m.group(3):
        bad += 1
        if bad < 5: print("not a whole line:", repr(line))
        continue
    r, n = int(m.group(1)), int(m.group(2))
    if n == seen.get(r, 0):
        # Read up to just before its newline, the line was drawn whole in the
        # status area as an unfinished one (and redrawn with the status line
        # until its newline came): not a torn line.
        partials += 1
        continue
    if n != seen.get(r, 0) + 1:
        bad += 1
        if bad < 5: print(f"rank {r}: line {n} after {seen.get(r, 0)}")
    seen[r] = n
if statuses < 3: print("too few redraws:", statuses); bad += 1
if sorted(seen) != [0, 1, 2, 3]: print("ranks seen:", sorted(seen)); bad += 1
print("status draws:", statuses, "lines:", sum(seen.values()), "unfinished lines drawn:", partials)
sys.exit(1 if bad else 0)
PY
}

# The area is gone before the report: after the last status text, an erase.
expect_area_erased() {
  /usr/bin/python3 - pty.out <<'PY' || fail "the status area was left on the terminal: $(tail -c 400 pty.out | cat -v)"
import sys
data = open(sys.argv[1], "rb").read().decode()
last = data.rfind("running,")
sys.exit(0 if last >= 0 and data.find("\x1b[2K", last) > last else 1)
PY
}

test_terminal_restored_after_a_killed_rank_and_ctrl_c() {
  have_script || return 0
  printf '#!/bin/sh\nsleep 0.7\n[ "$RANK" = 1 ] && kill -9 $$\nexec sleep 30\n' >r.sh
  chmod +x r.sh
  in_pty "stty -g >before; \"$AIR_RUN\" --cpu-ranks 2 --no-python ./r.sh; echo rc=\$?; stty -g >after"
  expect_contains "$(cat pty.out)" "running,"
  expect_contains "$(cat pty.out)" "rc=137"
  expect_eq "$(cat after)" "$(cat before)"
  expect_area_erased
  printf '#!/bin/sh\necho "up $RANK"\nexec sleep 30\n' >s.sh
  chmod +x s.sh
  rm -f after
  # The inner shell traps SIGINT so that it survives the Ctrl-C and reports rc (dash, the
  # usual /bin/sh, would die of it); the trap is reset to the default for air-run by exec.
  TERM=xterm timeout 30 env -u CI script -qfec "trap : INT; stty -g >before; \"$AIR_RUN\" --cpu-ranks 2 --grace-period 2s --no-python ./s.sh; echo rc=\$?; stty -g >after" /dev/null \
    < <(sleep 1.5; printf '\003'; sleep 4) >pty.out 2>&1
  expect_contains "$(cat pty.out)" "air-run: stopping 2 ranks (SIGINT), up to 2s; Ctrl-C again to kill now"
  expect_contains "$(cat pty.out)" "rc=130"
  expect_eq "$(cat after)" "$(cat before)"
  expect_area_erased
}

run_tests

#!/usr/bin/env bash
# The ranks' output as air-run passes it on in bulk (a read's whole lines at
# once, logs written from the read buffer, the tail kept raw until a report
# reads it): lines split across reads, progress bars, logs byte for byte,
# many ranks' long lines, the last lines of a rank whose console nobody reads.
source "$(dirname "$0")/lib.sh"

json() { # json FILE EXPR: one value from a JSON file
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

test_a_line_split_across_reads_is_one_prefixed_line() {
  run_air --cpu-ranks 2 --no-python sh -c \
    'printf "hel"; sleep 0.3; printf "lo wor"; sleep 0.3; printf "ld\nnext\n"; sleep 0.3; printf "last"'
  expect_rc 0
  expect_eq "$(grep -c '^\[rank0\]: ' stdout)" 3
  expect_contains "$out" "[rank0]: hello world"$'\n'"[rank0]: next"
  expect_contains "$out" "[rank1]: hello world"
  expect_contains "$out" "[rank1]: last"
}

test_a_progress_bar_split_across_reads_keeps_its_last_state() {
  # Off a terminal the bar is one line with its carriage returns; the report
  # shows its last state.
  run_air --cpu-ranks 2 --summary s.json --no-python sh -c \
    'echo start; printf "  5%%\r"; sleep 0.3; printf " 50%%\r"; sleep 0.3; printf "100%%\n"'
  expect_rc 0
  expect_contains "$out" "[rank0]:   5%"$'\r'" 50%"$'\r'"100%"
  expect_eq "$(json s.json 'd["ranks"][0]["last_line"]')" "100%"
  expect_eq "$(json s.json 'd["ranks"][1]["last_line"]')" "100%"
}

# Lines of every length (empty ones, one of 200 KB, one with '\r', one with an
# escape sequence), 1.5 MB in all, the last one without a newline.
write_mixed_output() {
  /usr/bin/python3 - <<'PY'
import random
random.seed(5)
lines = []
for i in range(12000):
    lines.append("line %d %s" % (i, "y" * random.randrange(0, 200)) if i % 7 else "")
lines[3000] = "z" * 200_000
lines[4000] = "  5%\r 50%\r100%"
lines[5000] = "\x1b[31mred\x1b[0m"
open("mixed.txt", "w").write("\n".join(lines) + "\nno newline at the end")
PY
}

test_log_dir_and_tee_files_hold_the_ranks_bytes_exactly() {
  write_mixed_output
  TMPDIR=$PWD run_air --cpu-ranks 2 --run-id t --log-dir logs --tee 3 --no-python cat mixed.txt
  expect_rc 0
  cmp logs/t/rank0.log mixed.txt || fail "rank0.log differs from what rank 0 wrote"
  cmp logs/t/rank1.log mixed.txt || fail "rank1.log differs from what rank 1 wrote"
  local dir
  dir=$(sed -n 's/^air-run: rank output files (--redirects\/--tee) in //p' stderr)
  cmp "$dir/attempt_0/1/stdout.log" mixed.txt || fail "torchrun's stdout.log differs from what rank 1 wrote"
  # The console: each line behind its prefix, the last one ended.
  grep -a '^\[rank1\]: ' stdout | cut -c10- >console1.txt
  { cat mixed.txt && echo; } | cmp - console1.txt || fail "rank 1's lines on the console differ"
}

test_one_log_for_both_streams_never_mixes_them_inside_a_line() {
  run_air --cpu-ranks 1 --run-id t --log-dir logs --no-python sh -c \
    'printf "a"; sleep 0.3; echo b >&2; sleep 0.3; echo c; printf "d" >&2'
  expect_rc 0
  expect_eq "$(cat logs/t/rank0.log)" "b"$'\n'"ac"$'\n'"d"
}

test_sixteen_ranks_long_lines_arrive_whole_through_a_pipe() {
  /usr/bin/python3 -c 'open("long.txt", "w").write("".join("L%d %s\n" % (i, "x" * 5000) for i in range(300)))'
  "$AIR_RUN" --cpu-ranks 16 --no-python cat long.txt 2>stderr | cat >stdout
  expect_eq "${PIPESTATUS[0]}" 0
  /usr/bin/python3 - <<'PY' || fail "a line torn, lost or out of order"
import re, sys
seen = [0] * 16
for line in open("stdout", "rb").read().split(b"\n")[:-1]:
    m = re.fullmatch(rb"\[rank(\d+)\]: L(\d+) x{5000}", line)
    if not m or int(m.group(2)) != seen[int(m.group(1))]:
        sys.exit("bad line: %r" % line[:60])
    seen[int(m.group(1))] += 1
sys.exit(None if seen == [300] * 16 else "lines per rank: %s" % seen)
PY
}

test_a_ranks_own_torch_prefix_is_said_once() {
  /usr/bin/python3 -c 'open("own.txt", "w").write("".join("[rank%%s]: n%d\n" % i for i in range(2000)))'
  run_air --cpu-ranks 2 --no-python sh -c 'sed "s/%s/$RANK/" own.txt; echo "[rank0]: from $RANK"'
  expect_rc 0
  expect_eq "$(grep -c '^\[rank1\]: n[0-9]*$' stdout)" 2000
  expect_contains "$out" "[rank1]: [rank0]: from 1" # another rank's prefix stays
  expect_contains "$out" "[rank0]: from 0"
}

test_the_last_lines_are_kept_with_the_console_on_dev_null() {
  "$AIR_RUN" --cpu-ranks 2 --summary s.json --no-python sh -c \
    '[ "$RANK" = 0 ] && exit 0; seq -f "line %g" 100000; echo "the end" >&2; exit 3' >/dev/null 2>&1
  expect_eq "$(json s.json 'd["ranks"][1]["last_line"]')" "the end"
  expect_eq "$(json s.json '"line 99999" in d["ranks"][1]["error"]["traceback"]')" "True"
  expect_eq "$(json s.json '"line 99950" in d["ranks"][1]["error"]["traceback"]')" "False" # 50 lines, no more
}

# A rank that prints in bulk fills a pipe far larger than the kernel's 64 KiB
# (fewer wakeups of air-run, each across CPUs): up to 1 MiB each, within a
# quarter of the user's pipe limit. The same for a rank forked warm.
test_a_ranks_output_pipes_are_enlarged() {
  local expected
  expected=$(/usr/bin/python3 - 4 <<'PY'
import sys
pipes = int(sys.argv[1])
most = min(1 << 20, int(open("/proc/sys/fs/pipe-max-size").read()))
soft = int(open("/proc/sys/fs/pipe-user-pages-soft").read()) * 4096
if soft:
    most = min(most, soft // 4 // pipes)
size = 65536
while size * 2 <= most:
    size *= 2
print(size)
PY
)
  cat >sizes.py <<'PY'
import fcntl
F_GETPIPE_SZ = 1032
print("pipes", fcntl.fcntl(1, F_GETPIPE_SZ), fcntl.fcntl(2, F_GETPIPE_SZ))
PY
  local flags
  for flags in --no-preload "--preload json"; do
    # shellcheck disable=SC2086 # two words
    run_air --nproc-per-node 2 --python /usr/bin/python3 $flags sizes.py
    expect_rc 0
    expect_contains "$out" "[rank0]: pipes $expected $expected"
    expect_contains "$out" "[rank1]: pipes $expected $expected"
  done
  [[ $expected -gt 65536 ]] || echo "  (this machine's limits leave the pipes at 64 KiB)"
}

# Ranks that print in bulk to consoles that never make them wait (files
# here) are read by threads of their own, beside their writers
# (core/run/output/pipe_readers.hpp). Their bytes keep their order on the
# console and in the logs; a rank that fails after printing in bulk is
# judged from its last lines, read before the judgement.
test_ranks_that_print_in_bulk_are_read_by_threads_of_their_own() {
  cat >bulk.py <<'PY'
import os, sys
rank = int(os.environ["RANK"])
out = sys.stdout
for i in range(150000):
    out.write("r%d %d %s\n" % (rank, i, "y" * (i % 97)))
    if i % 50000 == 0:
        sys.stderr.write("r%d err %d\n" % (rank, i))
        sys.stderr.flush()
out.flush()
if rank == 0 and not os.environ.get("FAIL"):
    tasks = os.listdir("/proc/%d/task" % os.getppid())
    readers = sum(open("/proc/%d/task/%s/comm" % (os.getppid(), t)).read().strip() == "air-run-read" for t in tasks)
    print("readers %d" % readers)
if rank == 3 and os.environ.get("FAIL"):
    sys.stderr.write("the end\n")
    sys.exit(3)
PY
  TMPDIR=$PWD run_air --cpu-ranks 4 --run-id t --log-dir logs --python /usr/bin/python3 bulk.py
  expect_rc 0
  local readers
  readers=$(sed -n 's/^\[rank0\]: readers //p' stdout)
  [[ ${readers:-0} -ge 1 ]] || fail "no pipe reader thread ran (readers: '${readers}')"
  /usr/bin/python3 - <<'PY' || fail "a line torn, lost or out of order"
import re, sys
seen = [0] * 4
for line in open("stdout", "rb").read().split(b"\n")[:-1]:
    m = re.fullmatch(rb"\[rank(\d)\]: r(\d) (\d+) (y*)", line)
    if not m:
        continue  # rank 0's count of readers
    r, i = int(m.group(1)), int(m.group(3))
    if int(m.group(2)) != r or i != seen[r] or len(m.group(4)) != i % 97:
        sys.exit("bad line: %r" % line[:60])
    seen[r] += 1
sys.exit(None if seen == [150000] * 4 else "lines per rank: %s" % seen)
PY
  local r
  for r in 0 1 2 3; do
    /usr/bin/python3 - "$r" logs/t/rank$r.log <<'PY' || fail "rank$r.log is not the rank's bytes"
import sys
r = int(sys.argv[1])
want = []
for i in range(150000):
    want.append("r%d %d %s\n" % (r, i, "y" * (i % 97)))
got = open(sys.argv[2]).read().splitlines(keepends=True)
out = [l for l in got if not l.startswith("r%d err" % r) and not l.startswith("readers") and l != "the end\n"]
errs = [l for l in got if l.startswith("r%d err" % r)]
sys.exit(None if out == want and len(errs) == 3 else "%d lines, %d of stderr" % (len(out), len(errs)))
PY
  done
  # A rank that fails after printing in bulk: judged from its last lines,
  # its stderr's after its stdout's, as it wrote them.
  FAIL=1 run_air --cpu-ranks 4 --summary s.json --python /usr/bin/python3 bulk.py
  expect_rc 3
  expect_eq "$(json s.json 'd["ranks"][3]["last_line"]')" "the end"
  expect_contains "$(json s.json 'd["ranks"][3]["error"]["traceback"]')" "r3 149999 "
}

run_tests

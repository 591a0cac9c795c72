#!/usr/bin/env bash
# Ranks on a terminal: when air-run's output is a terminal each rank's output
# is one too (isatty holds, colour and progress bars stay on), a rank's
# unfinished '\r' line shows as it changes, and no rank's line is torn. Piped
# or in CI, nothing changes. Terminals come from tests/e2e/rank_tty.py.
source "$(dirname "$0")/lib.sh"
unset CI

# on_tty OUT ARGS...: air-run ARGS on a fresh 100-column terminal; its bytes
# in OUT, $rc. With TTY_WHEN and TTY_TOUCH set, the file TTY_TOUCH is created
# once TTY_WHEN has appeared on the terminal; with TTY_RESIZE too, the
# terminal is first made that many columns wide.
on_tty() {
  local file=$1
  shift
  local when=()
  [[ -n ${TTY_WHEN:-} ]] && when=(--when "$TTY_WHEN" --touch "$TTY_TOUCH")
  [[ -n ${TTY_RESIZE:-} ]] && when+=(--resize "$TTY_RESIZE")
  # TERM as a terminal emulator sets it: a caller's may be "dumb" (a CI
  # runner, a chroot), which is no terminal to draw on.
  TERM=xterm python3 "$AIR_SOURCE_DIR/tests/e2e/rank_tty.py" "$file" --cols 100 "${when[@]}" -- "$AIR_RUN" "$@"
  rc=$?
}

# screen_text FILE: what reached the terminal with the escape codes taken out
# and every '\r' a line break, so that each piece air-run drew is one line.
screen_text() { sed 's/\x1b\[[0-9;?]*[A-Za-z]//g' "$1" | tr '\r' '\n'; }

readonly tty_probe='[ -t 1 ] && echo out-tty || echo out-pipe; [ -t 2 ] && echo err-tty >&2 || echo err-pipe >&2'

test_ranks_see_a_terminal_when_air_run_is_on_one() {
  on_tty screen --cpu-ranks 2 --no-python sh -c "$tty_probe"
  expect_rc 0
  local text
  text=$(screen_text screen)
  for r in 0 1; do
    expect_contains "$text" "[rank$r]: out-tty"
    expect_contains "$text" "[rank$r]: err-tty"
  done
  # The rank's terminal is as wide as what the prefix leaves of air-run's.
  on_tty screen --cpu-ranks 2 --no-python python3 -c 'import os; print(os.get_terminal_size().columns)'
  expect_contains "$(screen_text screen)" "[rank1]: 91"
}

test_piped_or_in_ci_ranks_keep_their_pipes() {
  run_air --cpu-ranks 2 --no-python sh -c "$tty_probe"
  expect_rc 0
  expect_contains "$out" "[rank1]: out-pipe"
  expect_contains "$err" "[rank1]: err-pipe"
  CI=true on_tty screen --cpu-ranks 2 --no-python sh -c "$tty_probe"
  expect_rc 0
  expect_contains "$(screen_text screen)" "[rank1]: out-pipe"
  # Output that goes to files only (-r 1: stdout) is no terminal's either.
  TMPDIR=$PWD on_tty screen --cpu-ranks 2 --log-dir logs -r 1 --no-python sh -c "$tty_probe"
  expect_rc 0
  expect_contains "$(screen_text screen)" "[rank1]: err-tty"
  expect_eq "$(cat logs/*_*/attempt_0/1/stdout.log)" "out-pipe" # torchrun's layout: beside the run's folder
}

test_an_unfinished_progress_line_shows_before_its_newline() {
  # Each rank draws "step 1 of 2" with '\r', then waits (up to 30 s) for the
  # file the terminal's reader creates once it has seen rank 1's line.
  local flag=$PWD/seen
  TTY_WHEN="[rank1]: step 1 of 2" TTY_TOUCH=$flag on_tty screen --cpu-ranks 2 --no-python sh -c '
    printf "step 0 of 2\rstep 1 of 2\r"
    i=0; while [ ! -e '"$flag"' ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
    [ -e '"$flag"' ] || printf "never seen "
    printf "step 2 of 2\n"'
  expect_rc 0
  [[ -e $flag ]] || fail "the unfinished line was not shown before its newline"
  local text
  text=$(screen_text screen)
  expect_not_contains "$text" "never seen"
  expect_contains "$text" "[rank0]: step 2 of 2"
}

test_an_unfinished_line_fits_the_terminal_after_a_resize() {
  # Rank 0's 150-column progress line is shown cut to the terminal behind
  # its prefix: 99 columns of the 100 (90 x's), then, once the window is
  # made 60 wide, 59 (50 y's). air-run reads the width when the window
  # changes (SIGWINCH), not at each line it draws.
  local flag=$PWD/resized xs ys
  xs=$(printf 'x%.0s' $(seq 150))
  ys=$(printf 'y%.0s' $(seq 150))
  TTY_WHEN="[rank0]: xxxxxxxxxx" TTY_TOUCH=$flag TTY_RESIZE=60 on_tty screen --cpu-ranks 2 --no-python sh -c '
    [ "$RANK" = 0 ] || exit 0
    printf "'"$xs"'\r"
    i=0; while [ ! -e '"$flag"' ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
    sleep 0.3
    printf "'"$ys"'\r"
    sleep 0.5
    printf "\n"'
  expect_rc 0
  [[ -e $flag ]] || fail "the first unfinished line was never shown"
  # lengths CHAR: the lengths of the pieces on the screen that are rank 0's CHAR run alone.
  lengths() { screen_text screen | sed -n "s/^\[rank0\]: \($1*\)$/\1/p" | awk '{ print length($0) }' | sort -un | tr '\n' ' '; }
  expect_contains " $(lengths x)" " 90 " # (and 50 if the area was redrawn between the two)
  expect_eq "$(lengths y)" "50 150 " # the last: the finished line, as the rank wrote it
}

test_lines_of_two_ranks_are_never_torn() {
  # Rank 0 redraws a progress line as fast as it can while rank 1 prints
  # whole lines: every piece on the screen is one rank's, whole.
  on_tty screen --cpu-ranks 2 --no-python sh -c '
    if [ "$RANK" = 0 ]; then
      i=0; while [ $i -lt 300 ]; do printf "bar %d/300\r" $i; i=$((i + 1)); done; printf "bar done\n"
    else
      i=0; while [ $i -lt 300 ]; do echo "line $i"; i=$((i + 1)); done
    fi'
  expect_rc 0
  local text bad
  text=$(screen_text screen)
  bad=$(grep -v -E '^(\[rank0\]: bar ([0-9]+/300|done)|\[rank1\]: line [0-9]+|air-run: .*|gpu.*|)$' <<<"$text" | head -3)
  [[ -z $bad ]] || fail "torn or stray pieces on the screen: $bad"
  expect_eq "$(grep -c -E '^\[rank1\]: line [0-9]+$' <<<"$text")" 300
  expect_contains "$text" "[rank0]: bar done"
}

run_tests

#!/usr/bin/env bash
# The run's HTML page in a real browser (headless Chromium from Debian): the
# lanes, attempts and markers the summary has are in the DOM the browser
# built, nothing is fetched from the network (a recording proxy and a check of
# the page's text), and the screenshot is not blank. Skipped (77) without
# chromium: `scripts/install-deps.sh --test` installs it.
source "$(dirname "$0")/lib.sh"

CHECK="$AIR_SOURCE_DIR/tests/browser/check_page.py"
if ! command -v chromium >/dev/null 2>&1; then
  echo "SKIP: chromium is not installed (apt-get install chromium)"
  exit 77
fi

test_clean_two_rank_run_in_the_browser() {
  run_air --cpu-ranks 2 --summary s.json --html page.html --no-python sh -c 'echo step; sleep 0.5'
  expect_rc 0
  python3 "$CHECK" page.html s.json >check.out 2>&1 || fail "$(cat check.out)"
}

test_restart_hang_and_straggler_in_the_browser() {
  # A synthetic day of 8 ranks at the series' budgets: a restart, a hang, a
  # straggler, 8 GPUs; the page must stay under 1 MB.
  python3 "$AIR_SOURCE_DIR/tests/browser/synthetic_summary.py" 8 86400 8 >day.json
  "$AIR_RUN" report day.json --html day.html 2>/dev/null || fail "report failed"
  (($(stat -c %s day.html) < 1000000)) || fail "page of 8 ranks over 24 h is $(stat -c %s day.html) bytes"
  python3 "$CHECK" day.html day.json >check.out 2>&1 || fail "$(cat check.out)"
}

test_grouped_lanes_at_1024_ranks_in_the_browser() {
  python3 "$AIR_SOURCE_DIR/tests/browser/synthetic_summary.py" 1024 3600 0 >big.json
  "$AIR_RUN" report big.json --html big.html 2>/dev/null || fail "report failed"
  python3 "$CHECK" big.html big.json >check.out 2>&1 || fail "$(cat check.out)"
}

test_the_checker_sees_a_page_that_fetches() {
  # The checks themselves: a page that loads an image from the network fails them.
  python3 "$AIR_SOURCE_DIR/tests/browser/synthetic_summary.py" 2 60 0 >s.json
  "$AIR_RUN" report s.json --html page.html 2>/dev/null
  sed -i 's|</footer>|<img alt="" src="http://198.51.100.7/pixel.png"></footer>|' page.html
  if python3 "$CHECK" page.html s.json >check.out 2>&1; then fail "a fetching page passed: $(cat check.out)"; fi
  expect_contains "$(cat check.out)" "connect out"
}

run_tests

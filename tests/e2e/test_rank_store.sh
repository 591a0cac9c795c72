#!/usr/bin/env bash
# No rank's exit takes the c10d store away from a peer still using it. air-run
# sets TORCHELASTIC_USE_AGENT_STORE=False, so rank 0 hosts torch.distributed's
# TCPStore in-process; the rank shim (core/run/python/air_run_store.py) keeps
# it alive at exit while peers are connected. Real torch with gloo on CPU:
# Debian's /usr/bin/python3 ($TORCH_PYTHON); fresh and warm ranks alike.
source "$(dirname "$0")/lib.sh"
# --nproc-per-node 2, not --cpu-ranks 2: two ranks on a GPU host too (they
# share its GPU), so the GPU machine runs the same cases with its own torch.

if ! "$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null; then
  echo "skip: $TORCH_PYTHON has no torch"
  exit 0
fi

AIR_BOUND=${AIR_BOUND:-300} # real torch ranks: a run that waits for ever ends (lib.sh run_air)

# Rank 0 returns as soon as the group is up; rank 1 uses the store rank 0
# hosts two seconds later. Before the linger it lost the store every time.
test_a_peer_uses_the_store_after_rank_0_returned() {
  cat >late.py <<'PY'
import os, time
import torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    time.sleep(2)
    store = dist.distributed_c10d._get_default_store()
    store.set("late", "1")
    print("rank 1 used the store after rank 0 returned:", store.get("late").decode(), flush=True)
PY
  local mode
  for mode in --no-preload "--preload torch"; do
    # shellcheck disable=SC2086 # the mode's words
    run_air --nproc-per-node 2 --python "$TORCH_PYTHON" $mode late.py
    expect_rc 0 || return 1
    expect_contains "$out" "rank 1 used the store after rank 0 returned: 1"
    expect_not_contains "$out$err" "Connection reset"
  done
}

# A peer that is gone, even without its interpreter's teardown (os._exit, as
# a crash), closed its connections: rank 0 does not wait for it.
test_rank_0_does_not_wait_for_a_peer_that_is_gone() {
  cat >gone.py <<'PY'
import os, time
import torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    os._exit(0)
time.sleep(1)
PY
  run_air --nproc-per-node 2 --python "$TORCH_PYTHON" --preload torch --summary summary.json gone.py
  expect_rc 0
  # From its start to its exit: the second of sleep and the group's start, no linger.
  local took
  took=$(json_get summary.json 'd["ranks"][0]["duration_s"]')
  "$TORCH_PYTHON" -c "import sys; sys.exit(float(sys.argv[1]) >= 20)" "$took" ||
    fail "rank 0 took $took s: it waited for a peer that was gone"
}

# A rank 0 that fails ends at once, for air-run to see, though a peer is
# still connected.
test_a_failing_rank_0_does_not_linger() {
  cat >fail.py <<'PY'
import time
import torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 0:
    raise RuntimeError("rank 0 fails")
time.sleep(120)
PY
  local mode took
  for mode in --no-preload "--preload torch"; do
    # shellcheck disable=SC2086 # the mode's words
    run_air --nproc-per-node 2 --python "$TORCH_PYTHON" $mode --summary summary.json fail.py
    expect_rc 1
    expect_contains "$(json_get summary.json 'd["ranks"][0]["error"]["message"]')" "rank 0 fails"
    took=$(json_get summary.json 'd["ranks"][0]["duration_s"]')
    "$TORCH_PYTHON" -c "import sys; sys.exit(float(sys.argv[1]) >= 20)" "$took" ||
      fail "$mode: rank 0 took $took s: a failing rank 0 lingered"
  done
}

run_tests "$@"

#!/usr/bin/env bash
# one device call: build, the spawn pool's tests, stack dumps on torch 2.11, launch bench
set -u
cd "$(dirname "$0")"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
B=build-gpu
start=$SECONDS
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release >/tmp/b.log 2>&1 && cmake --build $B -j 16 --target air-run unit_tests fixture_baseline_launcher fixture_list_fds fixture_sleep_forever >>/tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"; nproc; python3 -c 'import torch,sys; print(torch.__version__, sys.version.split()[0])'
timeout 120 $B/tests/unit_tests '[spawn_pool],[process],[stacks],[teardown]' 2>&1 | tail -3
for f in build/fixtures; do :; done
export AIR_RUN=$PWD/$B/cli/air-run AIR_FIXTURE_DIR=$PWD/$B/fixtures AIR_SOURCE_DIR=$PWD TORCH_PYTHON=$(command -v python3)
cmake --build $B -j 16 >>/tmp/b.log 2>&1
E2E_ONLY=stack timeout 120 bash tests/e2e/test_console.sh 2>&1 | tail -4
timeout 200 bash tests/e2e/test_orphans.sh 2>&1 | grep -E "^(ok|FAIL|not ok)" | sed 's/ (.*//' | sort | uniq -c | head -20
timeout 300 python3 scripts/bench-launch.py --air-run $AIR_RUN --baseline $B/fixtures/baseline_launcher --ranks 8,128,1024 --repeat 7 --launch-only --breakdown --spawn-threads 0,3,15 --json $OUT/bench-launch.json 2>&1 | tail -8

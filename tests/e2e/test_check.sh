#!/usr/bin/env bash
# `air-run --check`: the environment report (alone without a GPU), and the report
# over fake GPUs with a stand-in air-nccl-check (AIR_RUN_NCCL_CHECK) that
# prints what the real one would. The real NVML and NCCL paths run only on a
# GPU machine (docs/preflight.md).
source "$(dirname "$0")/lib.sh"

# run_air_bounded ARGS...: run_air under a time limit (the torch probe imports torch).
run_air_bounded() {
  timeout 180 "$AIR_RUN" "$@" >"$TESTDIR/stdout" 2>"$TESTDIR/stderr"
  rc=$?
  out=$(cat "$TESTDIR/stdout")
  err=$(cat "$TESTDIR/stderr")
}

# fake_nccl_check BUSBW_AT_256MIB [CORRECT]: a stand-in that records its
# CUDA_VISIBLE_DEVICES and prints a two-size report.
fake_nccl_check() {
  cat >fake-nccl-check <<EOF
#!/bin/sh
echo "\$CUDA_VISIBLE_DEVICES" >"$PWD/visible"
echo "host:1:1 [0] NCCL INFO some debug line on stdout"
echo '{"tool":"air-nccl-check","schema":1,"ok":true,"error":null,"nccl_version":"2.28.3","devices":[{"name":"NVIDIA H200"},{"name":"NVIDIA H200"}],"init_s":1.1,"total_s":1.5,"results":[{"bytes":1048576,"iterations":200,"time_us":25.0,"algbw_gbps":41.9,"busbw_gbps":41.9,"correct":true},{"bytes":268435456,"iterations":20,"time_us":925.0,"algbw_gbps":$1,"busbw_gbps":$1,"correct":${2:-true}}]}'
EOF
  chmod +x fake-nccl-check
  export AIR_RUN_NCCL_CHECK=$PWD/fake-nccl-check
}

# no_torch_python: an interpreter without torch (the one with it, without site-packages).
no_torch_python() {
  printf '#!/bin/sh\nexec %s -S "$@"\n' "$TORCH_PYTHON" >python-without-torch
  chmod +x python-without-torch
}

test_no_gpu_reports_the_environment() {
  # A CPU node: the report is the environment, and it passes when torch imports.
  AIR_RUN_FAKE_GPUS="NVIDIA H200" CUDA_VISIBLE_DEVICES=-1 run_air_bounded --check --python "$TORCH_PYTHON"
  expect_rc 0
  local version
  version=$("$TORCH_PYTHON" -c 'import platform; print(platform.python_version())')
  expect_contains "$out" "Python    $TORCH_PYTHON, Python $version"
  expect_contains "$out" "torch     $("$TORCH_PYTHON" -c 'import torch; print(torch.__version__)') (distributed backends: gloo"
  expect_contains "$out" 'GPUs      none (CUDA_VISIBLE_DEVICES="-1" hides every GPU (0 of 1 kept))'
  expect_contains "$out" "environment.python = $TORCH_PYTHON  (flag"
  expect_not_contains "$out" "(default)"
  expect_contains "$out" "Result: PASS"
  expect_eq "$err" ""
}

test_no_gpu_without_torch_fails() {
  no_torch_python
  CUDA_VISIBLE_DEVICES="" run_air_bounded --check --python "$PWD/python-without-torch"
  expect_rc 1
  expect_contains "$out" "Python    $PWD/python-without-torch, Python 3."
  expect_contains "$out" "torch     FAIL ModuleNotFoundError: No module named 'torch'"
  expect_contains "$out" "Result: FAIL"
}

test_no_gpu_json() {
  AIR_RUN_FAKE_GPUS="" run_air_bounded --check --json --python "$TORCH_PYTHON"
  expect_rc 0
  echo "$out" >report.json
  "$TORCH_PYTHON" - <<'PY' || fail "bad JSON report: $out"
import json, os
r = json.load(open("report.json"))
assert r["status"] == "pass" and r["exit_code"] == 0, r
e = r["environment"]
assert e["python"].startswith(os.environ["TORCH_PYTHON"] + ", Python 3."), e
assert e["torch"]["status"] == "pass" and "gloo" in e["backends"], e
assert e["gpus"] == "none (AIR_RUN_FAKE_GPUS is empty)", e
assert any(s.startswith("environment.python = " + os.environ["TORCH_PYTHON"]) for s in e["settings"]), e
PY
}

test_cpu_requested_reports_the_environment() {
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air_bounded --check --accelerator-type CPU --python "$TORCH_PYTHON"
  expect_rc 0
  expect_contains "$out" "GPUs      none (accelerator type CPU requested)"
}

test_usage_errors_are_exit_2() {
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --check -n 3
  expect_rc 2
  expect_eq "$err" "air-run: error: requested 3 accelerators, found GPU_2xH200"
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --check --accelerator-type GPU_2xH100
  expect_rc 2
  expect_contains "$err" "requested GPU_2xH100, found GPU_2xH200"
  run_air --check train.py
  expect_rc 2
  expect_eq "$err" "air-run: error: --check takes no TARGET (got 'train.py')"
  run_air --min-busbw 10 --no-python /bin/true
  expect_rc 2
  expect_eq "$err" "air-run: error: --min-busbw applies only to --check"
  run_air --check --min-busbw -3
  expect_rc 2
  expect_contains "$err" "--min-busbw"
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" AIR_RUN_NCCL_CHECK_TIMEOUT=soon run_air --check
  expect_rc 2
  expect_contains "$err" "AIR_RUN_NCCL_CHECK_TIMEOUT"
}

test_report_passes_over_nvlink_threshold() {
  fake_nccl_check 290.5
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --check
  expect_rc 0
  expect_contains "$out" "air-run preflight: 2 GPUs (GPU_2xH200)"
  expect_contains "$out" "GPU 0  NVIDIA H200  GPU-00000000-0000-0000-0000-000000000001  00000000:01:00.0"
  expect_contains "$out" "  SKIP  nvml             no NVML readings for GPUs from AIR_RUN_FAKE_GPUS"
  expect_contains "$out" "NCCL all-reduce (NCCL 2.28.3, 2 GPUs, init 1.10 s, total 1.50 s)"
  expect_contains "$out" "    256 MiB      20       925.0       290.5       290.5  ok"
  expect_contains "$out" \
    "  PASS  nccl_allreduce   busbw 290.5 GB/s at 256 MiB (minimum 100.0 GB/s: NVLink-class GPUs (H200))"
  expect_contains "$out" "Result: PASS (0 failed, 0 warnings, 2 skipped) in "
  # air-run hands the selected GPUs over by UUID.
  expect_eq "$(cat visible)" "GPU-00000000-0000-0000-0000-000000000001,GPU-00000000-0000-0000-0000-000000000002"
}

test_selection_narrows_the_gpus_checked() {
  fake_nccl_check 290.5
  AIR_RUN_FAKE_GPUS="4xNVIDIA H200" run_air --check -n 2
  expect_rc 0
  expect_contains "$out" "air-run preflight: 2 GPUs (GPU_2xH200)"
  expect_eq "$(cat visible)" "GPU-00000000-0000-0000-0000-000000000001,GPU-00000000-0000-0000-0000-000000000002"
}

test_slow_nvlink_fails() {
  fake_nccl_check 60.0
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --check
  expect_rc 1
  expect_contains "$out" \
    "  FAIL  nccl_allreduce   busbw 60.0 GB/s at 256 MiB (minimum 100.0 GB/s: NVLink-class GPUs (H200))"
  expect_contains "$out" "Result: FAIL (1 failed, 0 warnings, 2 skipped)"
  # The same bandwidth is fine for PCIe cards, and --min-busbw overrides.
  AIR_RUN_FAKE_GPUS="2xNVIDIA L40S" run_air --check
  expect_rc 0
  expect_contains "$out" "(minimum 5.0 GB/s: PCIe or unknown interconnect)"
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --check --min-busbw 50
  expect_rc 0
  expect_contains "$out" "(minimum 50.0 GB/s: --min-busbw)"
}

test_wrong_sum_fails() {
  fake_nccl_check 290.5 false
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --check
  expect_rc 1
  expect_contains "$out" "  FAIL  nccl_allreduce   wrong all-reduce sum at 256 MiB"
  expect_contains "$out" "WRONG"
}

test_json_report() {
  fake_nccl_check 290.5
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --check --json
  expect_rc 0
  echo "$out" >report.json
  "$TORCH_PYTHON" - <<'PY' || fail "bad JSON report: $out"
import json
r = json.load(open("report.json"))
assert r["status"] == "pass" and r["exit_code"] == 0, r
assert r["accelerator_type"] == "GPU_2xH200"
assert [g["checks"][0]["status"] for g in r["gpus"]] == ["skip", "skip"]
n = r["nccl"]
assert n["status"] == "pass" and n["min_busbw_gbps"] == 100.0, n
assert n["threshold_reason"] == "NVLink-class GPUs (H200)"
assert [s["bytes"] for s in n["results"]] == [1048576, 268435456]
assert n["results"][1]["busbw_gbps"] == 290.5
assert n["nccl_version"] == "2.28.3"
PY
}

test_single_gpu_skips_the_all_reduce() {
  fake_nccl_check 290.5
  AIR_RUN_FAKE_GPUS="NVIDIA H200" run_air --check
  expect_rc 0
  expect_contains "$out" "  SKIP  nccl_allreduce   one GPU: an all-reduce needs at least two"
  [[ ! -e visible ]] || fail "air-nccl-check ran for one GPU"
}

test_hung_helper_is_killed() {
  printf '#!/bin/sh\nsleep 30\n' >hang
  chmod +x hang
  local start=$SECONDS
  AIR_RUN_NCCL_CHECK=$PWD/hang AIR_RUN_NCCL_CHECK_TIMEOUT=1 AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --check
  expect_rc 1
  expect_contains "$out" "  FAIL  nccl_allreduce   air-nccl-check did not finish within 1 s (killed)"
  ((SECONDS - start < 20)) || fail "took $((SECONDS - start)) s"
}

test_crashing_helper_fails_with_its_stderr() {
  printf '#!/bin/sh\necho "cuda: bad things" >&2\necho not json\nexit 3\n' >crash
  chmod +x crash
  AIR_RUN_NCCL_CHECK=$PWD/crash AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --check
  expect_rc 1
  expect_contains "$out" \
    "  FAIL  nccl_allreduce   air-nccl-check ended with exit code 3; air-nccl-check output is not JSON: 'not json'"
  expect_contains "$out" "    cuda: bad things"
}

test_missing_helper_fails() {
  AIR_RUN_NCCL_CHECK=$PWD/nope AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --check
  expect_rc 1
  expect_contains "$out" "  FAIL  nccl_allreduce   cannot run air-nccl-check: "
  expect_contains "$out" "nope"
}

test_real_helper_degrades_without_the_gpus() {
  # The built air-nccl-check, handed fake UUIDs (or run without a driver),
  # finds no CUDA device and says so; air-run reports that as a failure.
  local helper
  helper=$(dirname "$AIR_RUN")/air-nccl-check
  [[ -x $helper ]] || { echo "  (air-nccl-check not built: skipped)"; return 0; }
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --check
  expect_rc 1
  expect_contains "$out" "  FAIL  nccl_allreduce   cudaGetDeviceCount: "
}

run_tests

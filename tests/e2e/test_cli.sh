#!/usr/bin/env bash
# The command line: version, help, bad input (exit 2, nothing launched), dry run, hardware matching.
source "$(dirname "$0")/lib.sh"

test_version() {
  run_air --version
  expect_rc 0
  [[ $out =~ ^air-run\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "bad version line: $out"
}

test_help_lists_spec_flags() {
  run_air --help
  expect_rc 0
  for flag in --num-accelerators --accelerator-type --timeout --spec --python --module --no-python \
    --master-port --grace-period --log-dir --ranks --dry-run --list-gpus --nproc-per-node; do
    expect_contains "$out" "$flag"
  done
}

# air-run registers with its parser only the options a line uses (the rest
# cost every launch 0.4-0.8 ms): each option, given alone, is still known.
# A value that does not fit is fine here (its own error); "unknown option"
# or "not expected" would mean the option was left out.
test_every_option_is_known_when_given_alone() {
  run_air --print-completion bash # its word list has every option
  local names name checked=0
  names=$(echo "$out" | sed -n "s/.*compgen -W '\(-f --spec [^']*\)'.*/\1/p" | tr ' ' '\n' | grep -- '^--')
  [[ $(echo "$names" | wc -l) -gt 70 ]] || fail "the completion lists only $(echo "$names" | wc -l) options"
  for name in $names; do
    [[ $name == --help || $name == --version || $name == --list-* || $name == --prune-envs || $name == --check ]] &&
      continue # these act at once
    run_air --dry-run "$name=1" /bin/true
    if [[ $err == *"unknown option"* || $err == *"not expected"* ]]; then
      fail "$name given alone is unknown: $err"
    fi
    checked=$((checked + 1))
  done
  echo "  $checked options given alone"
}

test_unknown_flag_is_exit_2() {
  run_air --num-acelerators 2 /bin/true
  expect_rc 2
  expect_contains "$err" "air-run: error:"
}

test_no_target_is_exit_2() {
  run_air -n 2
  expect_rc 2
  expect_contains "$err" "no target given"
}

test_missing_spec_file_names_it() {
  run_air -f nope.yaml
  expect_rc 2
  expect_contains "$err" "nope.yaml"
}

test_bad_spec_names_file_line_key_and_launches_nothing() {
  cat >job.yaml <<'YAML'
num_accelerators: 2
timout: 90m
command: [touch, launched]
YAML
  run_air -f job.yaml
  expect_rc 2
  expect_contains "$err" "job.yaml:2:1"
  expect_contains "$err" "timout"
  expect_contains "$err" "did you mean 'timeout'"
  [[ ! -e launched ]] || fail "a rank was launched for an invalid spec"
}

test_bad_value_type() {
  printf 'num_accelerators: two\ncommand: [touch, launched]\n' >job.yaml
  run_air -f job.yaml
  expect_rc 2
  expect_contains "$err" "job.yaml:1:"
  expect_contains "$err" "num_accelerators"
  [[ ! -e launched ]] || fail "launched"
}

test_bad_timeout_flag() {
  run_air --timeout soon --no-python touch launched
  expect_rc 2
  expect_contains "$err" "--timeout"
  [[ ! -e launched ]] || fail "launched"
}

test_dry_run_shows_origins_and_plan() {
  printf 'timeout: 90m\ncpu_ranks: 3\ncommand: [train.py, --lr, "0.1"]\n' >job.yaml
  touch train.py # a dry run checks the target as a launch does
  AIR_RUN_GRACE_PERIOD=5s run_air -f job.yaml --dry-run --master-port 29999 --python /usr/bin/python3
  expect_rc 0
  expect_contains "$out" "timeout = 90m"
  expect_contains "$out" "job.yaml:1"
  expect_contains "$out" "AIR_RUN_GRACE_PERIOD"
  expect_contains "$out" "--master-port"
  expect_contains "$out" "rank 2 (local 2): /usr/bin/python3 -u train.py --lr 0.1"
  expect_contains "$out" "MASTER_PORT=29999"
  expect_contains "$out" "WORLD_SIZE=3"
}

test_cpu_notice_without_gpu() {
  AIR_RUN_FAKE_GPUS="" run_air --dry-run --no-python /bin/true
  expect_rc 0
  expect_contains "$out$err" "no GPU found"
}

test_fake_gpu_type_mismatch_names_both_sides() {
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --accelerator-type GPU_8xH100 --no-python touch launched
  expect_rc 2
  expect_contains "$err" "requested GPU_8xH100, found GPU_2xH200"
  [[ ! -e launched ]] || fail "launched"
}

test_fake_gpu_too_many() {
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air -n 3 --no-python touch launched
  expect_rc 2
  expect_contains "$err" "GPU_2xH200"
  [[ ! -e launched ]] || fail "launched"
}

test_fake_gpu_fewer_uses_first() {
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air -n 1 --dry-run --no-python /bin/true
  expect_rc 0
  expect_contains "$out" "GPU-00000000-0000-0000-0000-000000000001"
  expect_not_contains "$out" "GPU-00000000-0000-0000-0000-000000000002"
}

test_cuda_visible_devices_is_left_as_the_parent_set_it() {
  # As under torchrun: ranks bind to device LOCAL_RANK inside the parent's list.
  CUDA_VISIBLE_DEVICES=1,0 AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air -n 2 \
    --no-python sh -c 'echo "cvd=${CUDA_VISIBLE_DEVICES-unset} order=${CUDA_DEVICE_ORDER-unset}"'
  expect_rc 0
  expect_eq "$(grep -c 'cvd=1,0 order=unset' stdout)" 2
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air -n 2 --no-python sh -c 'echo "cvd=${CUDA_VISIBLE_DEVICES-unset}"'
  expect_eq "$(grep -c 'cvd=unset' stdout)" 2
  # --isolate-gpus narrows it to each rank's GPU, by UUID.
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air -n 2 --isolate-gpus \
    --no-python sh -c 'echo "cvd=$CUDA_VISIBLE_DEVICES local=$LOCAL_RANK"'
  expect_contains "$out" "[rank1]: cvd=GPU-00000000-0000-0000-0000-000000000002 local=0"
}

test_more_ranks_than_gpus_only_under_torchrun_flags() {
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air -n 4 --dry-run --no-python /bin/true
  expect_rc 2
  expect_contains "$err" "requested 4 accelerators, found GPU_2xH200"
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --nproc_per_node 4 --dry-run --no-python /bin/true
  expect_rc 0
  expect_contains "$out" "4 ranks on 2 GPU(s)"
  expect_contains "$out" "rank 3 (local 3)"
  expect_eq "$(grep -c 'gpu: GPU-00000000-0000-0000-0000-000000000002' stdout)" 2
}

test_fake_gpu_default_uses_all_and_matches() {
  AIR_RUN_FAKE_GPUS="8xNVIDIA H100 80GB HBM3" run_air --accelerator-type GPU_8xH100 --dry-run --no-python /bin/true
  expect_rc 0
  expect_contains "$out" "rank 7 (local 7)"
  expect_contains "$out" "WORLD_SIZE=8"
}

test_cpu_type_on_a_gpu_machine_runs_n_cpu_ranks_without_probing() {
  # Two (fake) GPUs, but the run asks for CPU: three CPU ranks, no GPU probe,
  # no CUDA_VISIBLE_DEVICES for the ranks.
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --accelerator-type CPU -n 3 --summary s.json \
    --no-python sh -c 'echo "cvd=${CUDA_VISIBLE_DEVICES-unset}"'
  expect_rc 0
  expect_eq "$(grep -c 'cvd=unset' stdout)" 3
  expect_eq "$(python3 -c 'import json; d = json.load(open("s.json")); print(d["hardware"]["source"], d["hardware"]["gpus"], d["selection"]["cpu"], d["selection"]["ranks"])')" "skipped [] True 3"
}

test_legacy_flags_warn() {
  AIR_RUN_FAKE_GPUS="2xNVIDIA H100 80GB HBM3" run_air --gpus 2 --gpu-type H100 --dry-run --no-python /bin/true
  expect_rc 0
  expect_contains "$err" "deprecated"
  expect_contains "$out" "WORLD_SIZE=2"
}

test_list_gpus_json() {
  AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --list-gpus --json
  expect_rc 0
  echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["accelerator_type"]=="GPU_2xH200", d; assert len(d["gpus"])==2' ||
    fail "bad --list-gpus --json: $out"
  CUDA_VISIBLE_DEVICES=1 AIR_RUN_FAKE_GPUS="2xNVIDIA H200" run_air --list-gpus --json
  echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["accelerator_type"]=="GPU_1xH200", d' ||
    fail "CUDA_VISIBLE_DEVICES=1 not applied: $out"
}

test_list_gpus_without_gpu_says_why() {
  run_air --list-gpus
  expect_rc 0
  expect_contains "$out" "CPU"
}

test_master_port_in_use_is_reported() {
  python3 -c 'import socket,time,sys; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(30)' >port &
  local holder=$!
  wait_for '[[ -s port ]]' 5
  run_air --master-port "$(cat port)" --no-python touch launched
  kill $holder
  expect_rc 2
  expect_contains "$err" "already in use"
  [[ ! -e launched ]] || fail "launched"
}

run_tests

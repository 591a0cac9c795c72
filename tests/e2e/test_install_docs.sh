#!/usr/bin/env bash
# What an installed air-run ships besides the binary, all generated from the
# registered options and the key table: --help's layout, the man page and the
# bash and zsh completions. Also: the CPU notice stays quiet when CPU ranks
# were asked for.
source "$(dirname "$0")/lib.sh"

test_help_has_headings_in_order_and_fits_100_columns() {
  run_air --help
  expect_rc 0
  expect_contains "$out" "Usage: air-run [OPTIONS] TARGET [ARGS...]"
  local widest
  widest=$(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$TESTDIR/stdout")
  ((widest <= 100)) || fail "--help is $widest columns wide"
  local headings
  headings=$(grep -E '^[A-Za-z][A-Za-z ]*:$' "$TESTDIR/stdout" | tr '\n' '|')
  expect_eq "$headings" "Launch:|Accelerators:|Environment:|Nodes:|Output and reports:|MLflow tracking:|torchrun compatibility:|Other:|Examples:|"
  # A key's flag sits under its heading, the torchrun spellings under theirs.
  expect_contains "$(sed -n '/^Nodes:/,/^$/p' "$TESTDIR/stdout")" "--master-port PORT"
  expect_contains "$(sed -n '/^torchrun compatibility:/,/^$/p' "$TESTDIR/stdout")" "--nproc-per-node N|gpu|cpu|auto"
  expect_not_contains "$out" "--print-man"
}

test_torchrun_spelling_sets_the_key() {
  # torchrun's underscore spellings are read as its dashed ones (argparse treats both alike).
  AIR_RUN_FAKE_GPUS="" run_air --dry-run --nproc_per_node 3 --master_port 29999 --no_python /bin/true
  expect_rc 0
  expect_contains "$out" "nproc_per_node = 3  (flag --nproc-per-node)"
  expect_contains "$out" "master_port = 29999  (flag --master-port)"
  expect_contains "$out" "no_python = true  (flag --no-python)"
}

test_man_page_lists_every_flag_and_renders() {
  run_air --print-man
  expect_rc 0
  expect_contains "$out" ".TH AIR\\-RUN 1"
  "$AIR_RUN" --help >help.txt
  local flag
  for flag in $(grep -E '^  -' help.txt | grep -oE -- '--[a-z][a-z_-]+' | sort -u); do
    expect_contains "$out" "\\fB${flag//-/\\-}\\fR"
  done
  expect_contains "$out" "AIR_RUN_TIMEOUT"
  expect_contains "$out" "environment.dependencies"
  if command -v man >/dev/null; then
    cp "$TESTDIR/stdout" air-run.1
    MANWIDTH=100 man --warnings -l ./air-run.1 >page.txt 2>warnings.txt || fail "man failed: $(cat warnings.txt)"
    [[ ! -s warnings.txt ]] || fail "groff warnings: $(head -5 warnings.txt)"
    expect_contains "$(cat page.txt)" "air-run - launch a distributed training job"
    expect_contains "$(cat page.txt)" "--num-accelerators N"
  fi
}

# complete_words WORDS...: what the generated bash completion offers for the last word.
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
           _air_run; printf "%s\n" "${COMPREPLY[@]}"' complete air-run.bash "$@"
}

test_bash_completion() {
  "$AIR_RUN" --print-completion bash >air-run.bash || fail "--print-completion bash failed"
  expect_eq "$(bash -c 'source air-run.bash; complete -p air-run')" "complete -F _air_run air-run"
  expect_eq "$(complete_words air-run --acc)" "--accelerator-type"
  expect_eq "$(complete_words air-run -n 2 --nproc)" "--nproc-per-node"
  mkdir logs
  touch logfile
  expect_eq "$(complete_words air-run --log-dir log)" "logs"
  expect_eq "$(complete_words air-run --summary logf)" "logfile"
  # After TARGET, the words belong to the target: no air-run options.
  expect_eq "$(complete_words air-run -n 2 train.py --acc)" ""
}

test_zsh_completion_is_valid_zsh() {
  run_air --print-completion zsh
  expect_rc 0
  expect_contains "$out" "#compdef air-run"
  expect_contains "$out" "'*--accelerator-type[CPU or GPU_<n>x<MODEL> (GPU_1xA10, GPU_8xH100, GPU_2xH200...)]:TYPE:(CPU GPU_1xA10 "
  command -v zsh >/dev/null || return 0 # scripts/install-deps.sh test installs it
  zsh -n "$TESTDIR/stdout" || fail "zsh -n rejects the completion script"
}

test_unknown_shell_is_exit_2() {
  run_air --print-completion fish
  expect_rc 2
}

test_no_cpu_notice_when_cpu_ranks_were_asked_for() {
  AIR_RUN_FAKE_GPUS="" run_air --cpu-ranks 2 --no-python /bin/true
  expect_rc 0
  expect_not_contains "$err" "no GPU found"
  expect_contains "$err" "2 ranks exited 0"
  AIR_RUN_FAKE_GPUS="" run_air -n 2 --no-python /bin/true
  expect_contains "$err" "no GPU found"
}

test_cmake_install_into_a_prefix() {
  local build
  build=$(dirname "$AIR_FIXTURE_DIR")
  cmake --install "$build" --prefix "$TESTDIR/p" >install.log 2>&1 || fail "cmake --install failed: $(tail -5 install.log)"
  local f
  for f in bin/air-run share/man/man1/air-run.1.gz share/bash-completion/completions/air-run \
    share/doc/air-run/README.md share/doc/air-run/configs/demo.yaml; do
    [[ -f p/$f ]] || fail "not installed: $f"
  done
  ls p/share/zsh/*/_air-run >/dev/null || fail "zsh completion not installed"
  local package
  package=$(ls -d p/lib*/python3*/*-packages/air 2>/dev/null | head -n 1)
  [[ -f $package/__init__.py ]] || fail "air package not installed under p/lib*/python3*/*-packages"
  expect_eq "$(cmp <(gzip -dc p/share/man/man1/air-run.1.gz) <("$AIR_RUN" --print-man) && echo same)" "same"
  # The installed package finds the installed binary on PATH.
  expect_eq "$(cd / && PATH="$TESTDIR/p/bin:/usr/bin:/bin" PYTHONPATH="$TESTDIR/$(dirname "$package")" \
    "$TORCH_PYTHON" -c 'from air import _binary; print(_binary.resolve_binary())')" "$TESTDIR/p/bin/air-run"
}

run_tests

#!/usr/bin/env bash
# Which Python the ranks run: the interpreter of the environment air-run is
# installed in (the wheel's venv, a `torchrun` link in a venv's bin/), else
# python3 on PATH; named by --dry-run and, after a failed import, by the report.
source "$(dirname "$0")/lib.sh"
unset VIRTUAL_ENV CONDA_PREFIX

# make_venv DIR: a virtual environment's shape, its python3 Debian's.
make_venv() {
  mkdir -p "$1/bin"
  echo "home = /usr/bin" >"$1/pyvenv.cfg"
  ln -s /usr/bin/python3 "$1/bin/python3"
}

test_the_wheels_venv_gives_its_python() {
  touch train.py # a dry run checks the script as a launch does
  # pip puts the binary at <venv>/lib/pythonX.Y/site-packages/air/bin/air-run.
  make_venv "$PWD/v"
  local air=$PWD/v/lib/python3.11/site-packages/air/bin/air-run
  mkdir -p "$(dirname "$air")" && cp "$AIR_RUN" "$air"
  "$air" --dry-run train.py >stdout 2>stderr
  rc=$?
  expect_rc 0
  expect_contains "$(cat stdout)" \
    "environment.python = $PWD/v/bin/python3  (default, the Python environment air-run is installed in ($PWD/v))"
  # The user's word wins, and so does an environment the user activated.
  AIR_RUN_PYTHON=/usr/bin/python3 "$air" --dry-run train.py >stdout 2>stderr
  expect_contains "$(cat stdout)" "environment.python = /usr/bin/python3  (env AIR_RUN_PYTHON)"
  VIRTUAL_ENV=$PWD/other "$air" --dry-run train.py >stdout 2>stderr
  expect_contains "$(cat stdout)" "environment.python = python3  (default)"
}

test_a_torchrun_link_in_a_venv_gives_that_venvs_python() {
  touch train.py
  make_venv "$PWD/v2"
  ln -s "$AIR_RUN" "$PWD/v2/bin/torchrun"
  PATH=$PWD/v2/bin:$PATH torchrun --dry-run train.py >stdout 2>stderr
  rc=$?
  expect_rc 0
  expect_contains "$(cat stdout)" "environment.python = $PWD/v2/bin/python3  (default, the Python environment"
  # air-run built in a checkout is in no environment.
  run_air --dry-run train.py
  expect_contains "$out" "environment.python = python3  (default)"
}

test_a_failed_import_names_the_interpreter() {
  printf 'import no_such_module_for_air_run\n' >train.py
  run_air --cpu-ranks 2 train.py
  expect_rc 1
  expect_contains "$err" "ModuleNotFoundError"
  # The interpreter that ran, resolved and with its version, not just its name.
  local python3_path python3_version
  python3_path=$(type -P python3)
  python3_version=$(python3 -c 'import platform; print(platform.python_version())')
  expect_contains "$err" \
    "    Python: $python3_path, Python $python3_version (environment.python, default); --python or AIR_RUN_PYTHON picks another"
  printf 'raise SystemExit(3)\n' >train.py
  run_air --cpu-ranks 2 train.py
  expect_not_contains "$err" "Python: python3"
}

test_ranks_import_air_run_from_a_checkout() {
  # The README's set-up: build/cli on PATH, no PYTHONPATH. air-run hands its
  # own package to the ranks, behind site-packages.
  printf 'import sys, air\nprint("AIR_FROM", air.__file__)\nprint("LAST", sys.path[-1])\n' >train.py
  (unset PYTHONPATH AIR_PYTHON_PACKAGE_DIR && timeout 120 "$AIR_RUN" --python /usr/bin/python3 --cpu-ranks 1 train.py \
    >stdout 2>stderr)
  rc=$?
  expect_rc 0
  expect_contains "$(cat stdout)" "AIR_FROM $AIR_SOURCE_DIR/python/air/__init__.py"
  expect_contains "$(cat stdout)" "LAST $AIR_SOURCE_DIR/python"
  # An installed air (here: on PYTHONPATH) stays in front, and a different
  # version of it is named once.
  mkdir -p other/air && printf '__version__ = "9.9"\n' >other/air/__init__.py
  (unset AIR_PYTHON_PACKAGE_DIR && PYTHONPATH=$PWD/other timeout 120 "$AIR_RUN" --python /usr/bin/python3 \
    --cpu-ranks 2 train.py >stdout 2>stderr)
  rc=$?
  expect_rc 0
  expect_contains "$(cat stdout)" "AIR_FROM $PWD/other/air/__init__.py"
  expect_contains "$(cat stderr)" "the installed air package $PWD/other/air (version 9.9) is used"
  [[ $(grep -c "the installed air package" stderr stdout | awk -F: '{s+=$2} END {print s}') == 1 ]] ||
    fail "the version notice is not said once: $(cat stderr)"
}

run_tests

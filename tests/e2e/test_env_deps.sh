#!/usr/bin/env bash
# environment.dependencies: a cached virtual environment, built offline from a
# local wheel directory, shared by every rank and reused by later runs.
source "$(dirname "$0")/lib.sh"

# The interpreter itself, not a pyenv shim (shims cost ~200 ms per start).
PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
if [[ -z $PY ]] || ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "skip: no python3 with venv and ensurepip"
  exit 0
fi
# Only the sources the tests give: no pip configuration from the machine.
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_NO_INDEX PIP_REQUIRE_VIRTUALENV
export PIP_CONFIG_FILE=/dev/null

# make_wheel NAME VERSION DIR: a pure-Python wheel written by hand (no network, no build tools).
make_wheel() {
  "$PY" - "$@" <<'PY'
import base64, hashlib, os, sys, zipfile
name, version, outdir = sys.argv[1:4]
info = f"{name}-{version}.dist-info"
files = {
    f"{name}/__init__.py": f"VALUE = '{name}-{version}'\n",
    f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: air-run-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
def digest(text):
    raw = hashlib.sha256(text.encode()).digest()
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
files[f"{info}/RECORD"] = "".join(f"{p},{digest(c)},{len(c.encode())}\n" for p, c in files.items()) + f"{info}/RECORD,,\n"
os.makedirs(outdir, exist_ok=True)
with zipfile.ZipFile(os.path.join(outdir, f"{name}-{version}-py3-none-any.whl"), "w") as z:
    for path, content in files.items():
        z.writestr(path, content)
PY
}

setup_job() {
  make_wheel airtestpkg 1.0 wheels
  cat >job.yaml <<YAML
environment:
  python: $PY
  dependencies: [airtestpkg==1.0]
  no_index: true
  find_links: [wheels]
env_cache_dir: cache
YAML
  cat >show.py <<'PY'
import os, sys, airtestpkg
print("rank", os.environ["RANK"], airtestpkg.VALUE, "venv" if sys.prefix == os.environ["VIRTUAL_ENV"] else "no-venv")
PY
}

# Published environments (the <key> symlinks) and build directories.
entries() { find cache -maxdepth 1 -type l 2>/dev/null | wc -l; }
builds() { find cache/.store -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
count() { grep -c -- "$2" <<<"$1"; }

test_dependency_importable_in_every_rank_then_reused() {
  setup_job
  run_air -n 3 -f job.yaml show.py
  expect_rc 0
  for r in 0 1 2; do expect_contains "$out" "[rank$r]: rank $r airtestpkg-1.0 venv"; done
  expect_contains "$err" "air-run: building environment "
  expect_contains "$err" "(1 requirement) ... done in "
  expect_eq "$(entries)" 1
  expect_eq "$(builds)" 1
  local first
  first=$(readlink cache/*[0-9a-f])
  grep -q "airtestpkg" "cache/$first/air-run-env.json" || fail "marker lacks the requirement"

  run_air -n 2 -f job.yaml show.py
  expect_rc 0
  expect_contains "$out" "[rank1]: rank 1 airtestpkg-1.0 venv"
  expect_contains "$err" "air-run: using cached environment "
  expect_not_contains "$err" "building environment"
  expect_eq "$(count "$err" "cached environment")" 1
  expect_eq "$(entries)" 1
  expect_eq "$(readlink cache/*[0-9a-f])" "$first" # the same directory, nothing installed

  run_air --dry-run -f job.yaml show.py
  expect_rc 0
  expect_contains "$out" "exists, would be reused"
  expect_contains "$out" "$first/bin/python -u show.py"
}

test_paths_in_the_spec_file_are_relative_to_it() {
  mkdir proj && cd proj && setup_job && printf 'airtestpkg==1.0\n' >requirements.txt
  sed -i 's/dependencies: .*/dependencies: requirements.txt/' job.yaml
  cd /
  run_air -n 2 -f "$TESTDIR/proj/job.yaml" "$TESTDIR/proj/show.py"
  expect_rc 0
  expect_contains "$out" "[rank1]: rank 1 airtestpkg-1.0 venv"
  [[ -L $(echo "$TESTDIR"/proj/cache/*[0-9a-f]) ]] || fail "the cache is not next to the spec"
}

test_dry_run_builds_nothing() {
  setup_job
  run_air --dry-run -f job.yaml show.py
  expect_rc 0
  expect_contains "$out" "Python environment "
  expect_contains "$out" "does not exist, would be built"
  [[ ! -e cache ]] || fail "a dry run created the cache"
}

test_requirements_file_and_list_give_the_same_key() {
  setup_job
  make_wheel other_pkg 2.0 wheels
  printf '# pinned\nOther_Pkg >= 2.0   # inline comment\n\nairtestpkg==1.0\n' >requirements.txt
  sed 's/dependencies: .*/dependencies: requirements.txt/' job.yaml >file.yaml
  sed 's/dependencies: .*/dependencies: [airtestpkg==1.0, other-pkg>=2.0]/' job.yaml >list.yaml
  run_air --dry-run -f file.yaml show.py
  expect_rc 0
  local from_file from_list
  from_file=$(grep '^Python environment' <<<"$out")
  run_air --dry-run -f list.yaml show.py
  from_list=$(grep '^Python environment' <<<"$out")
  [[ -n $from_file ]] || fail "no environment line in the dry run"
  expect_eq "$from_list" "$from_file"
  printf -- '-r more.txt\n' >requirements.txt
  run_air -f file.yaml show.py
  expect_rc 2
  expect_contains "$err" "requirements.txt:1: '-r more.txt': requirement file includes (-r/-c) are not supported"
}

test_system_site_packages_changes_the_key() {
  setup_job
  run_air --dry-run -f job.yaml show.py
  local with without
  with=$(grep '^Python environment' <<<"$out")
  AIR_RUN_SYSTEM_SITE_PACKAGES=false run_air --dry-run -f job.yaml show.py
  expect_rc 0
  without=$(grep '^Python environment' <<<"$out")
  expect_contains "$out" "environment.system_site_packages = false  (env AIR_RUN_SYSTEM_SITE_PACKAGES)"
  [[ -n $with && $with != "$without" ]] || fail "same environment with and without system site packages: $with"
}

test_bad_requirement_exits_2_and_leaves_nothing() {
  setup_job
  sed 's/airtestpkg==1.0/definitely-missing-pkg==9.9/' job.yaml >bad.yaml
  run_air -n 2 -f bad.yaml show.py
  expect_rc 2
  expect_contains "$err" "air-run: error: environment.dependencies: pip install failed (exit code 1); nothing was kept in the cache. Last lines:"
  expect_contains "$err" "No matching distribution found for definitely-missing-pkg==9.9"
  expect_not_contains "$out" "[rank"
  expect_eq "$(entries)" 0
  expect_eq "$(builds)" 0
  [[ -z $(find cache -maxdepth 1 -name '.tmp-*') ]] || fail "a temporary link was left"
}

test_concurrent_runs_build_once() {
  setup_job
  "$AIR_RUN" -n 2 -f job.yaml show.py >out1 2>err1 &
  local p1=$!
  "$AIR_RUN" -n 2 -f job.yaml show.py >out2 2>err2 &
  local p2=$!
  wait $p1
  local rc1=$?
  wait $p2
  local rc2=$?
  expect_eq "$rc1/$rc2" "0/0"
  local all
  all=$(cat err1 err2)
  expect_eq "$(count "$all" "air-run: building environment")" 1
  expect_eq "$(count "$all" "air-run: using cached environment")" 1
  expect_contains "$(cat out1)" "[rank1]: rank 1 airtestpkg-1.0 venv"
  expect_contains "$(cat out2)" "[rank1]: rank 1 airtestpkg-1.0 venv"
  expect_eq "$(entries)" 1
  expect_eq "$(builds)" 1
}

# A build that hangs: pip asks an index that accepts connections and never answers.
test_signal_during_build_leaves_nothing() {
  setup_job
  "$PY" -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True); time.sleep(300)' >port &
  local server=$!
  wait_for '[[ -s port ]]' 10 || fail "no silent index server"
  local sig code
  for sig in INT TERM; do
    # A background job of a script ignores SIGINT; give air-run the default back.
    "$PY" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
      "$AIR_RUN" --no-index=false --index-url "http://127.0.0.1:$(cat port)/simple" -f job.yaml show.py >out 2>err &
    local pid=$!
    wait_for 'grep -qs "Looking in indexes" cache/.store/*/air-run-build.log' 60 || fail "pip did not start"
    kill -"$sig" $pid
    wait $pid
    code=$?
    [[ $sig == INT ]] && expect_eq "$code" 130
    [[ $sig == TERM ]] && expect_eq "$code" 143
    expect_contains "$(cat err)" "air-run: environment build interrupted by signal"
    expect_eq "$(entries)" 0
    expect_eq "$(builds)" 0
    [[ -z $(pgrep -f "$PWD/cache") ]] || fail "a build process survived: $(pgrep -af "$PWD/cache")"
  done
  # kill -9 cannot be handled: pip dies with air-run (parent-death signal) and
  # the next air-run removes the unpublished directory.
  "$AIR_RUN" --no-index=false --index-url "http://127.0.0.1:$(cat port)/simple" -f job.yaml show.py >out 2>err &
  pid=$!
  wait_for 'grep -qs "Looking in indexes" cache/.store/*/air-run-build.log' 60 || fail "pip did not start"
  kill -KILL $pid
  wait $pid
  expect_eq "$(entries)" 0
  expect_eq "$(builds)" 1
  wait_for '[[ -z $(pgrep -f "$PWD/cache") ]]' 10 || fail "pip outlived a killed air-run"
  run_air --env-cache-dir cache --list-envs
  expect_rc 0
  expect_contains "$out" "0 environments in $PWD/cache"
  expect_eq "$(builds)" 0
  kill $server
  # The index is not part of a finished build: the same job then builds fine offline.
  run_air -f job.yaml show.py
  expect_rc 0
  expect_eq "$(entries)" 1
}

# position TEXT NEEDLE: the byte offset of NEEDLE in TEXT (-1 when absent).
position() { python3 -c 'import sys; print(sys.argv[1].find(sys.argv[2]))' "$1" "$2"; }

test_build_in_ci_is_a_collapsible_group_and_the_summary_has_it() {
  setup_job
  GITHUB_ACTIONS=true run_air -n 2 -f job.yaml --summary s.json show.py
  expect_rc 0
  local open pip close
  open=$(position "$err" "::group::air-run: building environment ")
  pip=$(position "$err" "Successfully installed airtestpkg-1.0")
  close=$(position "$err" "::endgroup::")
  ((open >= 0 && pip > open && close > pip)) || fail "pip's output is not inside the group ($open $pip $close): $err"
  expect_contains "$err" "(1 requirement) in $PWD/cache/.store/"
  expect_contains "$err" "ready in "
  local key
  key=$(basename "$(echo cache/*[0-9a-f])")
  expect_eq "$(json_get s.json 'd["python_env"]["key"], d["python_env"]["cached"], d["python_env"]["requirements"]')" "$key False 1"
  expect_eq "$(json_get s.json 'd["python_env"]["build_seconds"] > 0, os.path.isfile(d["python_env"]["build_log"])')" "True True"
  # Reused: no build, so no seconds.
  run_air -n 2 -f job.yaml --summary s.json show.py
  expect_eq "$(json_get s.json 'd["python_env"]["cached"], d["python_env"]["build_seconds"]')" "True None"
  # GitLab's collapsible section markers.
  GITLAB_CI=true run_air --rebuild-env -f job.yaml show.py
  expect_rc 0
  expect_contains "$err" $'section_start:'
  expect_contains "$err" $':air_run_env_build[collapsed=true]\r\e[0Kair-run: building environment '
  expect_contains "$err" $'section_end:'
  # -q: nothing of the build, the ranks' output still there.
  run_air -q --rebuild-env -f job.yaml show.py
  expect_rc 0
  expect_not_contains "$err" "environment"
  expect_contains "$out" "airtestpkg-1.0 venv"
}

test_build_on_a_terminal_is_one_live_line() {
  command -v script >/dev/null || { echo "skip: no script(1)"; return 0; }
  setup_job
  TERM=xterm timeout 120 env -u CI -u GITHUB_ACTIONS -u GITLAB_CI script -qfec \
    "\"$AIR_RUN\" -n 2 -f job.yaml show.py; echo rc=\$?" /dev/null >pty.out 2>&1 </dev/null
  local text
  text=$(cat pty.out)
  expect_contains "$text" "rc=0"
  expect_contains "$text" $'\r\e[2Kair-run: building environment '
  expect_contains "$text" "(1 requirement): "
  expect_contains "$text" "ready in "
  expect_contains "$text" "rank 1 airtestpkg-1.0 venv"
  # pip's own lines stay in the build log, not on the terminal.
  expect_not_contains "$text" "Successfully installed"
  expect_not_contains "$text" "[env]"
  grep -q "Successfully installed airtestpkg-1.0" cache/.store/*/air-run-build.log || fail "the log lacks pip's output"
}

test_rebuild_list_and_prune() {
  setup_job
  run_air -f job.yaml show.py
  expect_rc 0
  local first
  first=$(readlink cache/*[0-9a-f])
  run_air --rebuild-env -f job.yaml show.py
  expect_rc 0
  expect_contains "$err" "air-run: building environment "
  expect_contains "$out" "airtestpkg-1.0 venv"
  local second
  second=$(readlink cache/*[0-9a-f])
  [[ $second != "$first" ]] || fail "--rebuild-env reused $first"
  [[ ! -e cache/$first ]] || fail "the replaced environment $first was kept"
  expect_eq "$(entries)" 1
  expect_eq "$(builds)" 1

  run_air --env-cache-dir cache --list-envs
  expect_rc 0
  expect_contains "$out" "1 environment in $PWD/cache"
  expect_contains "$out" "airtestpkg==1.0"
  run_air --env-cache-dir cache --prune-envs --older-than 1d
  expect_rc 0
  expect_contains "$out" "pruned 0 environment(s)"
  expect_eq "$(entries)" 1
  run_air --env-cache-dir cache --prune-envs
  expect_rc 0
  expect_contains "$out" "pruned 1 environment(s)"
  expect_eq "$(entries)" 0
  expect_eq "$(builds)" 0
}

run_tests

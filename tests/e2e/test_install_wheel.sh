#!/usr/bin/env bash
# The pip wheel that carries the binary, installed as a user would: into a
# fresh venv (with the system's packages visible, for torch), offline. It must
# give `import air`, an `air-run` command, and @distributed that finds the
# wheel's own binary with no configuration (no AIR_RUN_BINARY, venv not on
# PATH) and runs 2 gloo ranks with it.
#
# AIR_WHEEL names a built wheel (`make test-install` and `make portable` pass
# the one `make wheel` builds): then it must be tagged manylinux_2_31, its
# binary must ask for no glibc symbol newer than 2.31, and, with root, that
# binary runs in a minimal Debian 11 root (glibc 2.31). Without AIR_WHEEL the
# test builds one around $AIR_RUN (scripts/build-wheel.sh), for this machine.
# Uses /usr/bin/python3, Debian's, with torch, setuptools, wheel and venv.
# The tests run in order (a_ to e_) on one venv.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/debian_root.sh"

PY=$TORCH_PYTHON
if ! "$PY" -c 'import setuptools, wheel, ensurepip' 2>/dev/null; then
  echo "skip: $PY lacks setuptools, wheel or venv (scripts/install-deps.sh test)"
  exit 77
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/air-wheel-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RELEASE_WHEEL=${AIR_WHEEL:+yes}
if [[ -z ${AIR_WHEEL:-} ]]; then
  AIR_WHEEL=$(PYTHON=$PY "$AIR_SOURCE_DIR/scripts/build-wheel.sh" "$AIR_RUN" "$WORK/dist") || exit 1
fi
AIR_WHEEL=$(realpath "$AIR_WHEEL") # the tests run in folders of their own
VENV=$WORK/venv
"$PY" -m venv --system-site-packages "$VENV" || exit 1
"$VENV/bin/python" -m pip install -q --no-index --no-deps --no-cache-dir --disable-pip-version-check \
  "$AIR_WHEEL" || exit 1
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

# in_venv COMMAND...: as a user with the venv installed but not activated and
# nothing of this checkout in sight: a plain PATH, no AIR_* variables.
in_venv() {
  env -u AIR_RUN_BINARY -u AIR_RUN -u PYTHONPATH PATH=/usr/bin:/bin "$@" >"$TESTDIR/stdout" 2>"$TESTDIR/stderr"
  rc=$?
  out=$(cat "$TESTDIR/stdout")
  err=$(cat "$TESTDIR/stderr")
}

test_a_wheel_is_a_platform_wheel_with_the_binary() {
  [[ $(basename "$AIR_WHEEL") =~ ^air_run-0\.1\.0-py3-none-(linux|manylinux_[0-9]+_[0-9]+)_x86_64\.whl$ ]] ||
    fail "unexpected wheel name $(basename "$AIR_WHEEL")"
  [[ -x $SITE/air/bin/air-run ]] || fail "no executable $SITE/air/bin/air-run"
}

# The release wheel is for every Linux with glibc 2.31 or later (Debian 11,
# Ubuntu 20.04 and after), and its binary keeps that promise: a symbol of a
# newer glibc would make it refuse to start there.
test_a2_release_wheel_is_manylinux_2_31_and_its_binary_needs_no_newer_glibc() {
  [[ -n $RELEASE_WHEEL ]] || { echo "skip: a wheel built here, for this machine"; return 0; }
  [[ $(basename "$AIR_WHEEL") == air_run-0.1.0-py3-none-manylinux_2_31_x86_64.whl ]] ||
    fail "the release wheel is $(basename "$AIR_WHEEL"), not manylinux_2_31 (make wheel)"
  local newest
  newest=$(objdump -T "$SITE/air/bin/air-run" | grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -n 1)
  [[ -n $newest && $(printf '%s\n' "$newest" GLIBC_2.31 | sort -V | tail -n 1) == GLIBC_2.31 ]] ||
    fail "the wheel's binary needs ${newest:-no versioned glibc symbol?}, newer than glibc 2.31"
}

test_a3_release_wheels_binary_runs_in_debian_11() {
  [[ -n $RELEASE_WHEEL && $(id -u) == 0 ]] || { echo "skip: needs the release wheel and root"; return 0; }
  R=$(realpath -m "${AIR_ROOTS_DIR:-$(dirname "$AIR_WHEEL")/../roots}/bullseye-run")
  "$AIR_SOURCE_DIR/scripts/debian-root.sh" make bullseye "$R" || { fail "no Debian 11 root"; return; }
  trap 'rm -rf "$R"' EXIT # this test's subshell
  cp "$SITE/air/bin/air-run" "$R/usr/local/bin/air-run"
  in_root "ldd --version | head -n 1; air-run --version"
  expect_rc 0
  expect_contains "$out" "2.31"
  expect_contains "$out" "air-run 0.1.0"
  in_root "air-run --cpu-ranks 2 --no-python sh -c 'echo rank \$RANK of \$WORLD_SIZE'"
  expect_rc 0
  expect_contains "$out" "rank 1 of 2"
}

test_a2_the_wheel_requires_cloudpickle() {
  # @distributed on a function defined in __main__ needs it: a dependency,
  # not an extra, so that `pip install` gives the product page's example.
  # "cloudpickle>=1.6" or, from an older setuptools, "cloudpickle (>=1.6)";
  # without "; extra == ..." after it.
  local required
  required=$("$PY" -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = z.read([n for n in z.namelist() if n.endswith(".dist-info/METADATA")][0]).decode()
print([l.replace(" ", "").replace("(", "").replace(")", "") for l in meta.splitlines()
       if l.startswith("Requires-Dist: cloudpickle") and ";" not in l])' "$AIR_WHEEL")
  expect_eq "$required" "['Requires-Dist:cloudpickle>=1.6']"
}

test_b_air_run_command_in_the_venv() {
  in_venv "$VENV/bin/air-run" --version
  expect_rc 0
  expect_eq "$out" "air-run 0.1.0"
  in_venv "$VENV/bin/air-run" --cpu-ranks 2 --no-python sh -c 'echo rank $RANK of $WORLD_SIZE'
  expect_rc 0
  expect_contains "$out" "rank 1 of 2"
  in_venv env PATH="$VENV/bin:/usr/bin:/bin" sh -c 'command -v air-run'
  expect_eq "$out" "$VENV/bin/air-run"
  # Ranks run the venv's Python, not the first python3 on PATH.
  touch train.py # a dry run checks the script as a launch does
  in_venv "$VENV/bin/air-run" --dry-run train.py
  expect_contains "$out" "environment.python = $VENV/bin/python"
  expect_contains "$out" "(default, the Python environment air-run is installed in ($VENV))"
}

test_c_import_air_finds_the_wheels_binary() {
  in_venv "$VENV/bin/python" -c 'import air; from air import _binary; print(air.__file__); print(_binary.resolve_binary())'
  expect_rc 0
  expect_eq "$out" "$SITE/air/__init__.py"$'\n'"$SITE/air/bin/air-run"
}

test_d_distributed_runs_two_gloo_ranks_through_the_wheels_binary() {
  "$PY" -c 'import torch.distributed' 2>/dev/null || { echo "skip: no torch for $PY"; return 0; }
  cat >job.py <<'PY'
import os
from air import distributed

@distributed(num_accelerators=2, timeout=120)
def allreduce():
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    launcher = os.readlink("/proc/%d/exe" % os.getppid())  # the air-run that started this rank
    dist.destroy_process_group()
    return [int(os.environ["RANK"]), t.item(), launcher]

for rank, total, launcher in allreduce.distributed():
    print(rank, total, launcher)
PY
  in_venv timeout -k 5 180 "$VENV/bin/python" job.py
  expect_rc 0
  expect_contains "$out" "0 3.0 $SITE/air/bin/air-run"
  expect_contains "$out" "1 3.0 $SITE/air/bin/air-run"
}

test_e_uninstall_removes_the_binary() {
  in_venv "$VENV/bin/python" -m pip uninstall -q -y air-run
  expect_rc 0
  [[ ! -e $SITE/air && ! -e $VENV/bin/air-run ]] || fail "left behind: $(ls "$SITE/air" "$VENV/bin/air-run" 2>&1)"
}

run_tests

#!/usr/bin/env bash
# The Debian package, installed as a user would: `apt-get install ./air-run_*.deb`
# in a fresh minimal Debian 12 root (never on this machine), then air-run's
# help, a 2-rank CPU run, a Python target, the man page, bash completion, the
# air Python package, and `apt-get remove` leaving the root as it was.
# apt reads the mirror's package lists first (`apt-get update`), as on a user's
# machine, so that the package's Recommends (python3-cloudpickle, libcurl4)
# come with it by default.
#
# AIR_DEB names the package (`make test-install` takes the portable build's, `make wheel`);
# without it, or without root (debootstrap, chroot), the test is skipped (77).
# The root comes from scripts/debian-root.sh, cached as a tarball under
# AIR_ROOTS_DIR (default: roots/ next to the package).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/debian_root.sh"

if [[ -z ${AIR_DEB:-} || $(id -u) != 0 ]]; then
  echo "skip: needs AIR_DEB=<path of air-run_*.deb> and root (make test-install)"
  exit 77
fi
AIR_DEB=$(realpath "$AIR_DEB")
ROOTS=${AIR_ROOTS_DIR:-$(dirname "$AIR_DEB")/roots}
use_debian_root bookworm "$ROOTS/bookworm-deb-test" man-db python3 bash-completion

# Every file and directory of the root that a package could own.
file_list() {
  (cd "$R" && find . -xdev \( -path ./proc -o -path ./dev -o -path ./tmp -o -path ./run -o -path ./var/log \
    -o -path ./var/cache -o -path ./var/lib/dpkg -o -path ./var/lib/apt -o -path ./root \) -prune -o -print | sort)
}
file_list >"$ROOTS/before-install.txt"
# The packages installed in the root, a name a line.
packages() { "$AIR_SOURCE_DIR/scripts/debian-root.sh" run "$R" dpkg-query -W -f '${Package}\n' | sort; }
packages >"$ROOTS/packages-before.txt"

test_a_apt_installs_the_package_and_what_it_recommends() {
  cp "$AIR_DEB" "$R/tmp/"
  in_root "apt-get update -qq && apt-get install -y /tmp/$(basename "$AIR_DEB")"
  expect_rc 0
  in_root "dpkg-query -W -f '\${Status} \${Version}' air-run"
  expect_eq "$out" "install ok installed 0.1.0"
  in_root "dpkg-query -W -f '\${Status}\n' python3-cloudpickle libcurl4"
  expect_eq "$out" "install ok installed
install ok installed"
}

test_b_help_and_version() {
  in_root "air-run --version && air-run --help"
  expect_rc 0
  expect_contains "$out" "air-run 0.1.0"
  expect_contains "$out" "Usage: air-run [OPTIONS] TARGET [ARGS...]"
  in_root "command -v air-run"
  expect_eq "$out" "/usr/bin/air-run"
}

test_c_two_cpu_ranks() {
  in_root "air-run --cpu-ranks 2 --no-python sh -c 'echo rank \$RANK of \$WORLD_SIZE'"
  expect_rc 0
  expect_contains "$out" "rank 0 of 2"
  expect_contains "$out" "rank 1 of 2"
  expect_contains "$err" "2 ranks exited 0"
}

test_d_python_target_and_air_package() {
  in_root "printf 'import os, air\nprint(\"rank\", os.environ[\"RANK\"], air.__file__)\n' >/tmp/job.py &&
           cd /tmp && air-run --cpu-ranks 2 job.py"
  expect_rc 0
  expect_contains "$out" "rank 1 /usr/lib/python3/dist-packages/air/__init__.py"
  in_root "python3 -c 'from air import _binary; print(_binary.resolve_binary())'"
  expect_eq "$out" "/usr/bin/air-run"
}

test_d2_distributed_from_main_with_what_apt_installed() {
  # The product page's shape: the training function defined in the script
  # itself (__main__), sent to the ranks by value: cloudpickle comes with the
  # package (Recommends, which apt installs by default).
  in_root "dpkg-query -W -f '\${Status}' python3-cloudpickle"
  expect_eq "$out" "install ok installed"
  in_root "cat >/tmp/main_job.py <<'PY'
import os
from air import distributed

@distributed(num_accelerators=2, timeout=60)
def train(scale):
    return int(os.environ['RANK']) * scale

print('results', train.distributed(10))
PY
cd /tmp && python3 main_job.py"
  expect_rc 0
  expect_contains "$out" "results [0, 10]"
}

test_e_man_page() {
  in_root "MANWIDTH=100 man -P cat air-run"
  expect_rc 0
  expect_contains "$out" "air-run - launch a distributed training job"
  expect_contains "$out" "--accelerator-type TYPE"
}

test_f_bash_completion() {
  # bash-completion's loader finds the file by the command's name, as at a prompt.
  in_root ". /usr/share/bash-completion/bash_completion && __load_completion air-run && complete -p air-run &&
           COMP_WORDS=(air-run --acc) COMP_CWORD=1 && _air_run && echo \"reply: \${COMPREPLY[*]}\""
  expect_rc 0
  expect_contains "$out" "complete -F _air_run air-run"
  expect_contains "$out" "reply: --accelerator-type"
  in_root "test -f /usr/share/zsh/vendor-completions/_air-run"
  expect_rc 0
}

# Without libcurl (only recommended: `--no-install-recommends`, or removed):
# air-run runs, MLflow tracking over plain HTTP uses air-run's own client, and
# tracking over HTTPS, the one part that needs libcurl, says what to install.
test_f2_no_libcurl_needed_but_for_mlflow_over_https() {
  in_root "apt-get remove -y libcurl4 && apt-get autoremove -y"
  expect_rc 0
  in_root "ldconfig -p | grep -c 'libcurl' || true"
  expect_eq "$out" "0"
  in_root "air-run --mlflow-tracking-uri https://127.0.0.1:9 --mlflow-required --cpu-ranks 1 --no-python true"
  expect_rc 2
  expect_contains "$err" "MLflow tracking needs libcurl (libcurl.so.4), which is not installed"
  in_root "air-run --mlflow-tracking-uri http://127.0.0.1:9 --mlflow-timeout 1s --mlflow-required --cpu-ranks 1 --no-python true"
  expect_rc 2
  expect_not_contains "$err" "libcurl"
  expect_contains "$err" "Failed to connect to 127.0.0.1 port 9"
  in_root "air-run --mlflow-tracking-uri http://127.0.0.1:9 --cpu-ranks 1 --no-python sh -c 'echo ran'"
  expect_rc 0
  expect_contains "$out" "ran"
}

test_g_remove_leaves_nothing() {
  in_root "apt-get remove -y air-run"
  expect_rc 0
  # Then what apt brought with it (its Recommends and theirs), so that the
  # root is compared with itself as it was: anything left is air-run's.
  packages >packages-after.txt
  in_root "apt-get purge -y $(comm -13 "$ROOTS/packages-before.txt" packages-after.txt | tr '\n' ' ')"
  expect_rc 0
  in_root "dpkg-query -W -f '\${Status}' air-run"
  expect_not_contains "$out" "install ok installed"
  file_list >after-remove.txt
  diff "$ROOTS/before-install.txt" after-remove.txt >diff.txt || fail "files left after remove: $(head -20 diff.txt)"
}

run_tests

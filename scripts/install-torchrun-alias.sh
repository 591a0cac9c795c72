#!/usr/bin/env bash
# Opt-in: installs `torchrun` as a symlink to air-run, so scripts, sbatch files
# and CI configs that call torchrun run under air-run with no edit.
#
#   scripts/install-torchrun-alias.sh BIN_DIR [AIR_RUN]
#
# BIN_DIR is where the link goes (put it before torch's own bin directory on
# PATH, e.g. ~/.local/bin); AIR_RUN defaults to this checkout's
# build/cli/air-run, else the air-run on PATH (an installed one). An existing
# torchrun that is not already such a link is left alone unless --force is
# given first. Remove the link to go back to torch's torchrun.
set -euo pipefail

force=0
if [[ ${1:-} == --force ]]; then
  force=1
  shift
fi
bin_dir=${1:?usage: install-torchrun-alias.sh [--force] BIN_DIR [AIR_RUN]}
air_run=${2:-}
if [[ -z $air_run ]]; then
  air_run=$(dirname "$0")/../build/cli/air-run
  [[ -x $air_run ]] || air_run=$(command -v air-run || true)
fi
if [[ -z $air_run || ! -x $air_run || -d $air_run ]]; then
  echo "install-torchrun-alias: no executable air-run${air_run:+ at $air_run}: build it (make build) or name it as the second argument" >&2
  exit 2
fi
air_run=$(readlink -f "$air_run")
link=$bin_dir/torchrun
if [[ -e $link && ! -L $link && $force == 0 ]]; then
  echo "install-torchrun-alias: $link exists and is not a link; --force replaces it" >&2
  exit 2
fi
mkdir -p "$bin_dir"
ln -sfn "$air_run" "$link"
echo "torchrun -> $air_run"

# shellcheck shell=bash disable=SC2034 # the variables are for the lines' eval and the callers
# Helpers shared by tests/e2e/test_torchrun_lines.sh and
# scripts/torchrun-probe-compare.sh: read tests/data/torchrun_lines.txt, put
# the probe where a line's training script would be, and expand a line's
# arguments the way its shell would.

TORCHRUN_LINES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TORCHRUN_LINES_FILE=$TORCHRUN_LINES_DIR/../data/torchrun_lines.txt

# The variables the lines' own scripts set before calling torchrun, with small
# values (2 GPUs' worth of ranks) so every line runs on a CPU machine.
torchrun_line_vars() {
  NGPU=2 LOG_RANK=0 MODULE=llama3 CONFIG=llama3_debugmodel
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$1 head_node_ip=127.0.0.1 port_number=$1
  WORLD_SIZE=3 NUM_PROC=2 GPUS_PER_NODE=2 NNODES=1 NODE_RANK=0 logdir=runs/logs
}

# torchrun_line_args LINE: the launcher's arguments as the shell would pass
# them, in the array LINE_ARGS (the launcher word itself removed).
torchrun_line_args() {
  local rest=$1
  rest=${rest#torchrun }
  rest=${rest#python3 -m torch.distributed.run }
  set -- # "$@" in a line expands to nothing
  eval "LINE_ARGS=($rest)"
}

# torchrun_line_workdir DIR TARGET: creates DIR/work with the probe at TARGET
# (a script path, or "-m module" as a module under it) and prints the
# directory to run the line from (a subdirectory for "../script.py").
torchrun_line_workdir() {
  local dir=$1 target=$2 cwd=$1/work path
  mkdir -p "$cwd/sub"
  if [[ $target == "-m "* ]]; then
    path=${target#-m }
    path=${path//.//}.py
  else
    path=$target
    [[ $target == ../* ]] && cwd=$cwd/sub
  fi
  mkdir -p "$(dirname "$cwd/$path")"
  cp "$TORCHRUN_LINES_DIR/torchrun_probe.py" "$cwd/$path"
  echo "$cwd"
}

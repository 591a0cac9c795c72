"""What torchrun would give each rank of a command line, and a check of a probe's records.

  torchrun_lines.py expect ARG...        JSON of torchrun's reading of the arguments
  torchrun_lines.py check EXPECT PROBE_DIR
                                         compares the probe's rank*.json with EXPECT
  torchrun_lines.py compare TORCHRUN_DIR AIR_RUN_DIR
                                         diffs the probe's records under both launchers

The arguments are read by torchrun's own parser (torch.distributed.run's
get_args_parser) when torch is importable, with the options newer torchrun
releases added registered on top, so prefixes, both spellings, PET_* variables
and the `--` rule are argparse's. The values follow torchrun 2.x's rules
(run.py determine_local_world_size, local_elastic_agent.py _start_workers).
Run it with an interpreter that has torch (Debian's /usr/bin/python3 here).
"""

import json
import os
import shlex
import socket
import sys

# Options of torchrun 2.x that torch 1.13's parser lacks: (names, takes a value).
NEWER = [
    (("--local-ranks-filter", "--local_ranks_filter"), True),
    (("--logs-specs", "--logs_specs"), True),
    (("--numa-binding", "--numa_binding"), True),
    (("--signals-to-handle", "--signals_to_handle"), True),
    (("--duplicate-stdout-filters", "--duplicate_stdout_filters"), True),
    (("--duplicate-stderr-filters", "--duplicate_stderr_filters"), True),
    (("--shutdown-timeout", "--shutdown_timeout"), True),
    (("--event-log-handler", "--event_log_handler"), True),
    (("--virtual-local-rank", "--virtual_local_rank"), False),
    (("--local-addr", "--local_addr"), True),
]


def parser():
    from torch.distributed.argparse_util import check_env, env
    from torch.distributed.run import get_args_parser

    p = get_args_parser()
    # torch 1.13 spells its options with underscores only; 2.x accepts both.
    for option, action in list(p._option_string_actions.items()):
        dashed = option[:2] + option[2:].replace("_", "-")
        if option.startswith("--") and dashed not in p._option_string_actions:
            p._option_string_actions[dashed] = action
            action.option_strings.append(dashed)
    for names, takes_value in NEWER:
        if any(n in p._option_string_actions for n in names):
            continue
        dest = names[0][2:].replace("-", "_")
        if takes_value:
            p.add_argument(*names, action=env, dest=dest, type=str, default=None)
        else:
            p.add_argument(*names, action=check_env, dest=dest)
    return p


def expect(args):
    class Refused(Exception):
        pass

    def refuse(status=0, message=None):
        raise Refused(message or "")

    p = parser()
    p.exit = refuse
    try:
        ns = p.parse_args(args)
    except Refused as e:
        return {"refused": True, "reason": str(e).strip()}
    nproc = ns.nproc_per_node
    if nproc in ("gpu",):
        return {"refused": True, "reason": "Cuda is not available."}  # no GPU on this machine
    if nproc in ("cpu", "auto"):
        nproc = os.cpu_count()
    nnodes = ns.nnodes.split(":")
    backend = "c10d" if ns.standalone else ns.rdzv_backend
    return {
        "refused": False,
        "nproc": int(nproc),
        "min_nodes": int(nnodes[0]),
        "max_nodes": int(nnodes[-1]),
        "node_rank": int(ns.node_rank),
        "backend": backend,
        "role": ns.role,
        "module": bool(ns.module),
        "no_python": bool(ns.no_python),
        "script": ns.training_script,
        "args": ns.training_script_args,
        "master_addr": ns.master_addr,
        "master_port": int(ns.master_port) if any(a.startswith("--master") for a in args) else None,
        "max_restarts": int(ns.max_restarts),
        "tee": getattr(ns, "tee", "0"),
        "redirects": getattr(ns, "redirects", "0"),
        "local_ranks_filter": getattr(ns, "local_ranks_filter", None) or "",
        "numa_binding": getattr(ns, "numa_binding", None) or "",
        "virtual_local_rank": bool(getattr(ns, "virtual_local_rank", False)),
    }


def expect_each(dirs):
    """expect() for many lines in one interpreter (torch is imported once):
    reads DIR/args (the line's arguments, each ended by a NUL) and writes
    DIR/expect.json and DIR/expect.sh (e_KEY=value lines for a shell)."""
    for d in dirs:
        with open(os.path.join(d, "args")) as f:
            args = f.read().split("\0")[:-1]
        e = expect(args)
        with open(os.path.join(d, "expect.json"), "w") as f:
            json.dump(e, f)
        with open(os.path.join(d, "expect.sh"), "w") as f:
            f.writelines(f"e_{key}={shlex.quote(str(value))}\n" for key, value in e.items())


def local_fqdn():
    """socket.getfqdn() when a socket can bind to it, else None."""
    name = socket.getfqdn()
    with socket.socket() as s:
        try:
            s.bind((name, 0))
        except OSError:
            return None
    return name


def rank_env(e, local_rank):
    """The variables torchrun 2.x sets for one local rank on one node."""
    nodes = e["max_nodes"]
    group_rank = e["node_rank"] if e["backend"] == "static" else 0
    rank = group_rank * e["nproc"] + local_rank
    env = {
        "RANK": rank,
        # --virtual-local-rank: every worker is local rank 0 of its own device.
        "LOCAL_RANK": 0 if e.get("virtual_local_rank") else local_rank,
        "WORLD_SIZE": e["nproc"] * nodes,
        "LOCAL_WORLD_SIZE": e["nproc"],
        "GROUP_RANK": group_rank,
        "GROUP_WORLD_SIZE": nodes,
        "ROLE_RANK": rank,
        "ROLE_WORLD_SIZE": e["nproc"] * nodes,
        "ROLE_NAME": e["role"],
        "TORCHELASTIC_RESTART_COUNT": 0,
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": 1,
    }
    if e["max_restarts"] == 0:
        env["TORCHELASTIC_MAX_RESTARTS"] = 0
    # With --numa-binding air-run sets it to the cores a rank owns (docs/torchrun.md), not torchrun's 1.
    if e["nproc"] > 1 and "OMP_NUM_THREADS" not in os.environ and not e.get("numa_binding"):
        env["OMP_NUM_THREADS"] = 1
    if e["backend"] == "static":
        env["MASTER_ADDR"] = e["master_addr"]
        if e["master_port"] is not None:
            env["MASTER_PORT"] = e["master_port"]
    elif e["min_nodes"] == e["max_nodes"] == 1 and (fqdn := local_fqdn()):
        # torchrun's c10d rendezvous: node 0's fully qualified name (air-run
        # gives it where it is one of this host's addresses).
        env["MASTER_ADDR"] = fqdn
    return {k: str(v) for k, v in env.items()}


def check(expect_file, probe_dir):
    with open(expect_file) as f:
        e = json.load(f)
    problems = []
    ranks = e["nproc"]
    files = sorted(os.listdir(probe_dir))
    if len(files) != ranks:
        problems.append(f"{len(files)} rank records ({files}), expected {ranks}")
    parent_cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    for local_rank in range(ranks):
        want = rank_env(e, local_rank)
        path = os.path.join(probe_dir, f"rank{want['RANK']}.json")
        if not os.path.exists(path):
            problems.append(f"no record for rank {want['RANK']}")
            continue
        with open(path) as f:
            got = json.load(f)
        env = got["env"]
        for name, value in want.items():
            if env.get(name) != value:
                problems.append(f"rank {want['RANK']}: {name}={env.get(name)!r}, torchrun gives {value!r}")
        want_cvd = parent_cvd
        if e.get("virtual_local_rank"):  # its own entry of the parent's list, else its local rank
            want_cvd = parent_cvd.split(",")[local_rank].strip() if parent_cvd is not None else str(local_rank)
        if env.get("CUDA_VISIBLE_DEVICES") != want_cvd:
            problems.append(f"rank {want['RANK']}: CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES')!r}, "
                            f"torchrun gives {want_cvd!r}")
        if not env.get("TORCHELASTIC_ERROR_FILE", "").endswith("error.json"):
            problems.append(f"rank {want['RANK']}: TORCHELASTIC_ERROR_FILE={env.get('TORCHELASTIC_ERROR_FILE')!r}")
        if got["argv"] != e["args"]:
            problems.append(f"rank {want['RANK']}: argv {got['argv']}, torchrun gives {e['args']}")
        script = e["script"].replace(".", "/") + ".py" if e["module"] else e["script"]
        if not got["argv0"].endswith(script.lstrip("./")):
            problems.append(f"rank {want['RANK']}: ran {got['argv0']}, expected {script}")
    for p in problems:
        print(p)
    return 1 if problems else 0


# Variables whose values differ on purpose (docs/torchrun.md): compared for presence only.
DELIBERATE = {
    "TORCHELASTIC_RUN_ID": "air-run's run id (torchrun: --rdzv-id, 'none' or a uuid)",
    "TORCHELASTIC_USE_AGENT_STORE": "False: rank 0 hosts the TCPStore, there is no agent store",
    "TORCHELASTIC_ERROR_FILE": "a path in air-run's run directory",
}
COMPARED = [
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
] + list(DELIBERATE)


def compare(torchrun_dir, air_dir, port_may_differ=False, omp_may_differ=False):
    """Diffs two probe recordings of one line; prints one line per difference.

    port_may_differ: the line has a c10d rendezvous (--standalone is one), under
    which each launcher picks a free port of its own for the ranks' store, so
    MASTER_PORT is compared for presence only. omp_may_differ: the line has
    --numa-binding, under which air-run sets OMP_NUM_THREADS to the cores a
    rank owns (torchrun: 1)."""
    deliberate = dict(DELIBERATE)
    if port_may_differ:
        deliberate["MASTER_PORT"] = "c10d: a free port each"
    if omp_may_differ:
        deliberate["OMP_NUM_THREADS"] = "--numa-binding: the cores a rank owns"
    diffs = []
    a_files, b_files = sorted(os.listdir(torchrun_dir)), sorted(os.listdir(air_dir))
    if a_files != b_files:
        diffs.append(f"ranks: torchrun {a_files}, air-run {b_files}")
    for name in sorted(set(a_files) & set(b_files)):
        with open(os.path.join(torchrun_dir, name)) as f:
            a = json.load(f)
        with open(os.path.join(air_dir, name)) as f:
            b = json.load(f)
        if a["argv"] != b["argv"]:
            diffs.append(f"{name}: argv torchrun {a['argv']}, air-run {b['argv']}")
        for var in COMPARED:
            va, vb = a["env"].get(var), b["env"].get(var)
            if var in deliberate:
                if (va is None) != (vb is None):
                    diffs.append(f"{name}: {var} set by one only (torchrun {va!r}, air-run {vb!r})")
            elif va != vb:
                diffs.append(f"{name}: {var} torchrun {va!r}, air-run {vb!r}")
    for d in diffs:
        print(d)
    return 1 if diffs else 0


if __name__ == "__main__":
    if sys.argv[1] == "expect":
        print(json.dumps(expect(sys.argv[2:])))
    elif sys.argv[1] == "expect-each":
        expect_each(sys.argv[2:])
    elif sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    elif sys.argv[1] == "fqdn":
        # The MASTER_ADDR one c10d node gives its ranks; argv[2] where air-run
        # keeps the rendezvous host instead (the name is not a local address).
        print(local_fqdn() or sys.argv[2])
    elif sys.argv[1] == "compare":
        options = [a for a in sys.argv[2:] if a.startswith("--")]
        dirs = [a for a in sys.argv[2:] if not a.startswith("--")]
        sys.exit(compare(*dirs, port_may_differ="--port-may-differ" in options,
                         omp_may_differ="--omp-may-differ" in options))
    else:
        sys.exit(f"unknown subcommand {sys.argv[1]}")

"""A rank that dies while the others are blocked in an NCCL all-reduce.

Rank 1 exits with code 9 after the first collective; the others enter a second
all-reduce that can never complete. air-run must name rank 1 as the root cause
and tear the blocked ranks down within the grace period.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
use_cuda = torch.cuda.is_available()
if use_cuda:
    torch.cuda.set_device(local_rank)
dist.init_process_group("nccl" if use_cuda else "gloo")
device = torch.device(f"cuda:{local_rank}") if use_cuda else torch.device("cpu")
t = torch.ones(1 << 20, device=device)
dist.all_reduce(t)
if use_cuda:
    torch.cuda.synchronize()
print(f"rank {dist.get_rank()}: first all-reduce done", flush=True)
if dist.get_rank() == 1:
    time.sleep(1)
    sys.exit(9)
dist.all_reduce(t)  # blocks forever: rank 1 is gone
if use_cuda:
    torch.cuda.synchronize()
print("unreachable", flush=True)

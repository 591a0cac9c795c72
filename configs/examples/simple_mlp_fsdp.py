"""The SimpleMLP example under FSDP instead of DDP (GPU only: FSDP shards over NCCL).

Run it: `air-run configs/examples/simple_mlp_fsdp.py --epochs 3` on a machine with GPUs.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1)).cuda()
    model = FSDP(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(4096, 10, device="cuda")
    y = torch.randn(4096, 1, device="cuda")
    shard = slice(rank * len(x) // world, (rank + 1) * len(x) // world)
    for epoch in range(args.epochs):
        total = 0.0
        for i in range(shard.start, shard.stop, 64):
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x[i : i + 64]), y[i : i + 64])
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"rank {rank}/{world} fsdp epoch {epoch}: loss {total:.4f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

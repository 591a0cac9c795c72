"""The product page's SimpleMLP example as a plain script, run once per rank by air-run.

On GPUs every rank binds `cuda:LOCAL_RANK` and trains with NCCL; without GPUs the
ranks train on CPU with gloo. Random data, a few epochs; each rank prints its loss.
Run it: `air-run -f configs/demo.yaml`, or `air-run -n 2 configs/examples/simple_mlp_ddp.py --epochs 3`.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class SimpleMLP(nn.Module):
    def __init__(self, input_dim=10, hidden_dim=64, output_dim=1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(input_dim, hidden_dim),
            nn.ReLU(),
            nn.Dropout(0.2),
            nn.Linear(hidden_dim, hidden_dim),
            nn.ReLU(),
            nn.Dropout(0.2),
            nn.Linear(hidden_dim, output_dim),
        )

    def forward(self, x):
        return self.net(x)


def setup():
    """NCCL on GPUs (bound by LOCAL_RANK), gloo on CPU; rendezvous from MASTER_ADDR/PORT."""
    if torch.cuda.is_available():
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")
        return torch.device(f"cuda:{local_rank}")
    dist.init_process_group("gloo")
    return torch.device("cpu")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--samples", type=int, default=5000)
    args = parser.parse_args()

    device = setup()
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)  # same data on every rank; DistributedSampler splits it
    model = SimpleMLP().to(device)
    model = DDP(model, device_ids=[device] if device.type == "cuda" else None)

    x = torch.randn(args.samples, 10)
    y = torch.randn(args.samples, 1)
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset)
    dataloader = DataLoader(dataset, sampler=sampler, batch_size=args.batch_size)
    optimizer = optim.Adam(model.parameters(), lr=0.001)
    loss_fn = nn.MSELoss()

    start = time.time()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total_loss = 0.0
        for xb, yb in dataloader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * xb.size(0)
        print(f"rank {rank}/{world} epoch {epoch}: loss {total_loss / len(sampler):.4f}")

    # Every rank must agree on the final weights: DDP keeps them in sync.
    checksum = torch.tensor([sum(p.detach().sum().item() for p in model.parameters())], device=device)
    gathered = [torch.zeros_like(checksum) for _ in range(world)]
    dist.all_gather(gathered, checksum)
    in_sync = all(abs(g.item() - checksum.item()) < 1e-4 for g in gathered)
    print(f"rank {rank}: done in {time.time() - start:.1f}s, weights in sync: {in_sync}")
    result_file = os.environ.get("AIR_RESULT_FILE")
    if result_file:  # air-run's result protocol: one JSON value, written atomically
        import json

        tmp = result_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"final_loss": total_loss / len(sampler), "weights_in_sync": in_sync, "device": str(device)}, f)
        os.replace(tmp, result_file)
    dist.destroy_process_group()
    if not in_sync:
        raise SystemExit(3)


if __name__ == "__main__":
    main()

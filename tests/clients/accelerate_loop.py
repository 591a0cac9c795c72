"""An accelerate training loop as people write it, launched by a torchrun
line (accelerate reads the launcher's variables). Tiny model, random data,
CPU + gloo.

  air-run --nproc-per-node 2 accelerate_loop.py [--max-steps 20]
"""
import argparse

import torch
from accelerate import Accelerator

import faults


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-steps", type=int, default=20)
    opts = parser.parse_args()
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.randn(512, 8), torch.randn(512, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    step = 0
    while step < opts.max_steps:
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            faults.at_step(step)
            if step >= opts.max_steps:
                break
    accelerator.print("trained: steps=%d processes=%d loss=%.4f" % (step, accelerator.num_processes, loss.item()))


if __name__ == "__main__":
    main()

"""A PyTorch Lightning fit as people write it, launched by a torchrun line:
Lightning finds its TorchElasticEnvironment in the launcher's variables and
starts no processes of its own. A tiny regression, random data, CPU + gloo.

  air-run --nproc-per-node 2 lightning_fit.py [--max-steps 20]
"""
import argparse
import json
import os

import torch

try:
    import lightning as L
except ImportError:  # the older package name
    import pytorch_lightning as L

import faults


class Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        faults.at_step(self.global_step + 1)
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def children():
    """Processes this rank started (Lightning's own launcher would start some)."""
    me = str(os.getpid())
    count = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/stat" % pid) as f:
                    if f.read().rsplit(")", 1)[1].split()[1] == me:
                        count += 1
            except (OSError, IndexError):
                pass
    return count


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-steps", type=int, default=20)
    opts = parser.parse_args()
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=8, num_workers=0)
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    nodes = int(os.environ.get("WORLD_SIZE", "1")) // per_node
    trainer = L.Trainer(accelerator="cpu", devices=per_node, num_nodes=nodes, strategy="ddp",
                        max_steps=opts.max_steps, logger=False, enable_checkpointing=False,
                        enable_progress_bar=True)
    trainer.fit(Regression(), loader)
    environment = type(trainer.strategy.cluster_environment).__name__
    print("fit: rank=%d world=%d environment=%s children=%d" % (trainer.global_rank, trainer.world_size,
                                                                 environment, children()))
    result = os.environ.get("AIR_RESULT_FILE")
    if result:
        with open(result + ".tmp", "w") as f:
            json.dump({"rank": trainer.global_rank, "world_size": trainer.world_size, "environment": environment,
                       "pid": os.getpid(), "ppid": os.getppid()}, f)
        os.replace(result + ".tmp", result)


if __name__ == "__main__":
    main()

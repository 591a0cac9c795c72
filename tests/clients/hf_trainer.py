"""A Hugging Face Trainer run as people write them, launched by a torchrun
line: a tiny GPT-2 built from a config, random tokens, nothing downloaded.
Resumes from the latest checkpoint in --output-dir when there is one.

  air-run --nproc-per-node 2 hf_trainer.py --output-dir DIR [--max-steps 20]
"""
import argparse
import json
import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

import faults


def cpu_device_loads():
    """On CPU ranks (gloo), accelerate names each rank's device torch.device("cpu", 0),
    and the Trainer's resume loads the optimizer with that as map_location, which
    torch.load refuses ("don't know how to restore data location ... (tagged with
    cpu:0)"): the same under torchrun. Map "cpu:N" to "cpu", as a user of CPU DDP
    must. AIR_TEST_NO_LOAD_FIX=1 leaves torch.load as it is (to show the failure
    is the libraries' own)."""
    if os.environ.get("AIR_TEST_NO_LOAD_FIX"):
        return
    load = torch.load

    def load_on_cpu(*args, map_location=None, **kwargs):
        if isinstance(map_location, (str, torch.device)) and torch.device(map_location).type == "cpu":
            map_location = "cpu"
        return load(*args, map_location=map_location, **kwargs)

    torch.load = load_on_cpu


class RandomTokens(torch.utils.data.Dataset):
    def __len__(self):
        return 512

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(0, 128, (16,), generator=g)
        return {"input_ids": ids, "labels": ids}


class InjectFaults(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        faults.at_step(state.global_step)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--max-steps", type=int, default=20)
    opts = parser.parse_args()
    cpu_device_loads()
    config = GPT2Config(vocab_size=128, n_positions=16, n_embd=32, n_layer=2, n_head=2)
    model = GPT2LMHeadModel(config)
    args = TrainingArguments(output_dir=opts.output_dir, max_steps=opts.max_steps, per_device_train_batch_size=4,
                             save_steps=5, logging_steps=5, report_to=[], use_cpu=True, ddp_backend="gloo",
                             dataloader_num_workers=0, disable_tqdm=False, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=RandomTokens(), callbacks=[InjectFaults()])
    last = get_last_checkpoint(opts.output_dir) if os.path.isdir(opts.output_dir) else None
    out = trainer.train(resume_from_checkpoint=last)
    if trainer.is_world_process_zero():
        print("trained: global_step=%d resumed_from=%s loss=%.4f" % (trainer.state.global_step, last,
                                                                      out.training_loss))
    result = os.environ.get("AIR_RESULT_FILE")
    if result:
        with open(result + ".tmp", "w") as f:
            json.dump({"global_step": trainer.state.global_step, "resumed_from": last}, f)
        os.replace(result + ".tmp", result)


if __name__ == "__main__":
    main()

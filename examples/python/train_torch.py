"""A DeepSpeed training script run on deepspeed_c.

It differs from a script written for DeepSpeed only in the import line marked
below: replace it by ``import deepspeed`` and it runs on DeepSpeed itself
(on a CPU: ``DS_ACCELERATOR=cpu`` and a one-rank gloo world, e.g.
``RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500``).

    python examples/python/train_torch.py [--steps N] [--config ds_config.json]
    tools/ds-run -n 2 python examples/python/train_torch.py    # two data-parallel ranks
"""
import argparse
import json

import torch

import deepspeed_c.torch as deepspeed  # DeepSpeed: import deepspeed

DS_CONFIG = {
    "train_micro_batch_size_per_gpu": 16,
    "gradient_accumulation_steps": 2,
    "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW",
                  "params": {"lr": 3e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01,
                             "torch_adam": True}},
    "scheduler": {"type": "WarmupLR",
                  "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 3e-3, "warmup_num_steps": 20,
                             "warmup_type": "linear"}},
    "steps_per_print": 1000000,
}


def make_data(n, seed=0):
    """A synthetic regression task: y = tanh(x @ W / sqrt(32)) + noise."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(32, 8, generator=g)
    x = torch.randn(n, 32, generator=g)
    y = torch.tanh(x @ w / 32 ** 0.5) + 0.01 * torch.randn(n, 8, generator=g)
    return torch.utils.data.TensorDataset(x, y)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps")
    parser.add_argument("--config", default=None, help="a DeepSpeed JSON config (default: built in)")
    args = parser.parse_args()
    config = DS_CONFIG
    if args.config:
        with open(args.config) as f:
            config = json.load(f)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.GELU(), torch.nn.Linear(128, 8))
    engine, optimizer, _, lr_scheduler = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config)

    gas = engine.gradient_accumulation_steps()
    dataset = make_data(args.steps * engine.train_batch_size())
    # each rank reads its own share of every global batch
    sampler = torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=engine.world_size, rank=engine.global_rank, shuffle=False)
    loader = torch.utils.data.DataLoader(dataset, batch_size=engine.train_micro_batch_size_per_gpu(),
                                         sampler=sampler)
    window = []
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
        window.append(loss.item())
        if len(window) == gas:
            step = engine.global_steps
            if engine.global_rank == 0 and (step == 1 or step % 10 == 0):
                norm = engine.get_global_grad_norm()  # DeepSpeed: None at ZeRO 0 in fp32
                shown = "n/a" if norm is None else f"{norm:.4f}"
                print(f"step {step:4d}  loss {sum(window) / gas:.5f}  lr {engine.get_lr()[0]:.6f}  "
                      f"grad_norm {shown}")
            window = []
    if engine.global_rank == 0:
        print(f"done: {engine.global_steps} steps, {engine.global_samples} samples, "
              f"{engine.skipped_steps} skipped")


if __name__ == "__main__":
    main()

"""Train CharLM (charlm.py) as a longhaul worker, or on its own.

As a longhaul worker (started by a region agent; see job.yaml and README.md):

    python3 train.py [--context 64 --d-model 96 --layers 2 --heads 4]

Everything about the run (data, optimizer, H, codec, outer optimizer, rounds)
comes from the job spec through `longhaul.torch`; only the model's size is a flag.
Every region must be given the same model flags.

On its own, without longhaul:

    python3 train.py --standalone --text /usr/share/common-licenses/GPL-3 --steps 300
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from datetime import timedelta

# One intra-op thread unless the job says otherwise (worker.env: OMP_NUM_THREADS).
# The model is small, and a host often runs several workers (or, in the demo, several
# regions); OpenBLAS's spinning threads then fight over the cores. This must be set
# before torch (and OpenBLAS with it) is loaded.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from charlm import CharLM, TextData, evaluate  # noqa: E402

EVAL_BATCHES = 4
MIN_LR_RATIO = 0.1


def lr_at(step: int, lr: float, warmup: int, total: int) -> float:
    """Learning rate for the step after `step` completed ones: linear warm-up
    over `warmup` steps, then cosine decay to MIN_LR_RATIO * lr at `total`."""
    t = step + 1
    if warmup > 0 and t <= warmup:
        return lr * t / warmup
    span = total - warmup
    p = min(1.0, (t - warmup) / span) if span > 0 else 1.0
    min_lr = lr * MIN_LR_RATIO
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * p))


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    for group in opt.param_groups:
        group["lr"] = lr


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def build_model(args) -> CharLM:
    model = CharLM(context=args.context, d_model=args.d_model, layers=args.layers, heads=args.heads)
    return model.to(DTYPES[args.dtype])


def standalone(args) -> int:
    lr, batch_size, warmup, seed = 3e-3, 16, 20, 1
    torch.manual_seed(seed)
    data = TextData(args.text, args.context, validation_fraction=0.05)
    model = build_model(args)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    print(f"standalone: {model.num_params()} parameters, {data.train_range[1]} training bytes, "
          f"{data.val_range[1] - data.val_range[0]} validation bytes, {args.steps} steps, "
          f"val at start {evaluate(model, data, EVAL_BATCHES):.3f}", flush=True)
    losses, t0 = [], time.perf_counter()
    for step in range(args.steps):
        set_lr(opt, lr_at(step, lr, warmup, args.steps))
        x, y = data.batch(batch_size, gen)
        loss = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if (step + 1) % 50 == 0 or step + 1 == args.steps:
            ms = (time.perf_counter() - t0) * 1000.0 / len(losses)
            val = evaluate(model, data, EVAL_BATCHES)
            print(f"step {step + 1:5d}  loss {sum(losses) / len(losses):.3f}  val {val:.3f}  "
                  f"lr {opt.param_groups[0]['lr']:.2e}  {ms:.1f} ms/step", flush=True)
            losses, t0 = [], time.perf_counter()
    return 0


def init_region_group(world_size: int):
    """The region's own workers: one gloo group over the torchrun variables the
    agent sets (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)."""
    import torch.distributed as dist
    if not dist.is_initialized():
        seconds = int(os.environ.get("EXAMPLE_GLOO_TIMEOUT_S", "900"))
        dist.init_process_group("gloo", init_method="env://",
                                timeout=timedelta(seconds=seconds))
    if dist.get_world_size() != world_size:
        raise RuntimeError(f"torch.distributed world size {dist.get_world_size()} != "
                           f"job workers_per_region {world_size}")
    return dist


def average_gradients(dist, params, world_size: int) -> None:
    """Mean of the gradients over the region's workers, in one flat all_reduce."""
    grads = [p.grad for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat.div_(world_size)
    offset = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[offset:offset + n].view_as(g))
        offset += n


def worker(args) -> int:
    import longhaul.torch as lh

    cfg = lh.job_config()
    tag = f"[{cfg.job_id} {cfg.region} rank {cfg.rank}/{cfg.world_size}]"
    if cfg.data.text_file is None:
        print(f"{tag} this example trains on text: the job needs data.text_file", file=sys.stderr)
        return 2
    data = TextData(cfg.data.text_file.path, args.context,
                    validation_fraction=cfg.data.text_file.validation_fraction,
                    region_index=cfg.region_index, region_count=cfg.region_count,
                    rank=cfg.rank, world_size=cfg.world_size)

    torch.manual_seed(cfg.seed)  # identical initial parameters everywhere: no start-up transfer
    model = build_model(args)

    last_eval = {"fresh": False, "val": float("nan")}

    def eval_fn() -> float:
        last_eval["val"] = evaluate(model, data, EVAL_BATCHES)
        last_eval["fresh"] = True
        return last_eval["val"]

    opt = torch.optim.AdamW(model.parameters(), lr=cfg.inner.lr,
                            betas=(cfg.inner.beta1, cfg.inner.beta2),
                            weight_decay=cfg.inner.weight_decay)
    # Joins the job: the params now hold the global ones; AdamW's moments are
    # rolled back with them and, in a sync job, shared with a rejoining region.
    diloco = lh.DiLoCo(model, eval_fn=eval_fn, optimizer=opt)
    params = [p for p in model.parameters() if p.requires_grad]
    dist = init_region_group(cfg.world_size) if cfg.world_size > 1 else None

    H = cfg.sync.inner_steps
    total_steps = cfg.rounds * H
    loud = cfg.rank == 0
    if loud:
        print(f"{tag} CharLM {model.num_params()} params, slice {data.slice_index}/"
              f"{data.slice_count} bytes {data.train_range}, {cfg.rounds} rounds x H={H}",
              file=sys.stderr, flush=True)

    if diloco.resynced and loud:  # a relaunched worker: the job's state came from a live region
        print(f"{tag} resynced from a live region at job step {diloco.job_step}", file=sys.stderr, flush=True)
    losses = []
    while not diloco.finished:
        set_lr(opt, lr_at(diloco.job_step, cfg.inner.lr, cfg.inner.warmup_steps, total_steps))
        # The data position is the job step: a relaunched worker resumes there.
        starts = data.starts_at(cfg.inner.batch_size, cfg.seed, diloco.job_step)
        if args.trace_data:
            print(f"data step {diloco.job_step} windows {','.join(str(int(s)) for s in starts)}",
                  file=sys.stderr, flush=True)
        x, y = data.batch_at(starts)
        loss = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if dist is not None:
            average_gradients(dist, params, cfg.world_size)
        diloco.sync_gradients()  # sync kind: the mean over every region; every other kind: a no-op
        opt.step()
        losses.append(loss.item())
        last_eval["fresh"] = False
        event = diloco.step(loss=losses[-1], tokens=x.numel())
        if event in ("committed", "finished"):
            if loud and losses:
                val = last_eval["val"] if last_eval["fresh"] else eval_fn()
                print(f"{tag} {'round' if event == 'committed' else 'finished at round'} "
                      f"{diloco.committed_round}  loss {sum(losses) / len(losses):.3f}  val {val:.3f}",
                      file=sys.stderr, flush=True)
            losses = []
        elif event in ("rolled_back", "resynced"):
            if loud:
                print(f"{tag} {event} at job step {diloco.job_step}", file=sys.stderr, flush=True)
            losses = []

    if dist is not None:
        dist.destroy_process_group()
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--context", type=int, default=64, help="sequence length (bytes)")
    ap.add_argument("--d-model", type=int, default=96, help="embedding width")
    ap.add_argument("--layers", type=int, default=2, help="transformer blocks")
    ap.add_argument("--heads", type=int, default=4, help="attention heads")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32",
                    help="parameter dtype (bfloat16: longhaul's outer step stays float32)")
    ap.add_argument("--standalone", action="store_true", help="train without longhaul")
    ap.add_argument("--text", help="text file to train on (--standalone)")
    ap.add_argument("--steps", type=int, default=300, help="training steps (--standalone)")
    ap.add_argument("--trace-data", action="store_true",
                    help="print each step's window starts (worker mode; tests check a relaunch resumes the data)")
    args = ap.parse_args(argv)
    if args.standalone:
        if not args.text:
            ap.error("--standalone needs --text FILE")
        return standalone(args)
    if args.text:
        ap.error("--text is only for --standalone (a longhaul job names its data in the job spec)")
    return worker(args)


if __name__ == "__main__":
    sys.exit(main())

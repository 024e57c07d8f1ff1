"""The Python worker bench_sdk launches: longhaul.torch.DiLoCo on a model with
exactly the built-in trainer's ByteLM parameter layout, and inner steps that
cost next to nothing, so that what remains of a round is the SDK's outer step.

    python3 sdk_bench_worker.py --context 16 --embed 48 --hidden 768 --layers 3 \
        [--touch all|none] [--time-steps] [--result-dir DIR]

--touch all   every inner step scales every parameter by (1 - 1e-4): a
              deterministic, non-zero pseudo-gradient touching the whole buffer
--touch none  the inner step does nothing (for timing the no-op step())
--time-steps  times every step() call that is not a sync point with
              time.perf_counter_ns, next to an empty Python function call with
              the same arguments and a bare timer pair measured in the same loop
--result-dir  writes <dir>/<job id>-<region>-rank<r>.json with the figures
              (bench_sdk reads it back); also SDK_BENCH_RESULT_DIR in the env
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import longhaul.torch as lh  # noqa: E402

VOCAB = 256


class ByteLMShapes(nn.Module):
    """The built-in trainer's ByteLM tensors (trainer/src/model.cpp)
    in the same order and shapes; never run forward, only carried."""

    def __init__(self, context: int, embed: int, hidden: int, layers: int):
        super().__init__()
        self.embed_weight = nn.Parameter(torch.empty(VOCAB, embed))
        tensors = []
        fan_in = context * embed
        for _ in range(layers):
            tensors.append(nn.Parameter(torch.empty(fan_in, hidden)))
            tensors.append(nn.Parameter(torch.zeros(hidden)))
            fan_in = hidden
        self.layers = nn.ParameterList(tensors)
        self.head_weight = nn.Parameter(torch.empty(hidden, VOCAB))
        self.head_bias = nn.Parameter(torch.zeros(VOCAB))
        with torch.no_grad():
            self.embed_weight.uniform_(-math.sqrt(3.0), math.sqrt(3.0))
            for p in list(self.layers) + [self.head_weight]:
                if p.dim() == 2:
                    bound = 1.0 / math.sqrt(p.shape[0])
                    p.uniform_(-bound, bound)


def summary(ns: list[int]) -> dict:
    if not ns:
        return {"count": 0, "median_ns": 0, "p99_ns": 0, "mean_ns": 0}
    s = sorted(ns)
    return {"count": len(s), "median_ns": s[len(s) // 2], "p99_ns": s[min(len(s) - 1, (len(s) * 99) // 100)],
            "mean_ns": sum(s) / len(s)}


def empty_call(loss=0.0, tokens=0):  # the baseline: a Python call with step()'s arguments
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--context", type=int, required=True)
    ap.add_argument("--embed", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--touch", choices=["all", "none"], default="all")
    ap.add_argument("--time-steps", action="store_true")
    ap.add_argument("--result-dir", default=os.environ.get("SDK_BENCH_RESULT_DIR", ""))
    args = ap.parse_args()

    cfg = lh.job_config()
    torch.manual_seed(cfg.seed)  # identical initial parameters in every region
    model = ByteLMShapes(args.context, args.embed, args.hidden, args.layers)
    evals = {"calls": 0}

    def eval_fn() -> float:  # exercises the callback path; no validation work
        evals["calls"] += 1
        return 1.0

    diloco = lh.DiLoCo(model, eval_fn=eval_fn)
    flat = diloco.flat_parameters
    H = cfg.sync.inner_steps
    tag = f"[{cfg.job_id} {cfg.region} rank {cfg.rank}]"
    print(f"{tag} {flat.numel()} params, {cfg.rounds} rounds x H={H}, touch {args.touch}, "
          f"time steps {args.time_steps}", file=sys.stderr, flush=True)

    def report() -> None:
        """Writes the figures so far. Called before the job's last step(): the
        agent stops the workers as soon as the last round commits."""
        result = {"job_id": cfg.job_id, "region": cfg.region, "rank": cfg.rank, "params": flat.numel(),
                  "inner_steps": H, "rounds": cfg.rounds, "eval_calls": evals["calls"],
                  "timer_pair": summary(timer), "empty_call": summary(empty),
                  "step_float": summary(step_float), "step_tensor": summary(step_tensor)}
        print(f"{tag} result {json.dumps(result)}", file=sys.stderr, flush=True)
        if args.result_dir:
            path = os.path.join(args.result_dir, f"{cfg.job_id}-{cfg.region}-rank{cfg.rank}.json")
            with open(path + ".tmp", "w") as f:
                json.dump(result, f)
            os.replace(path + ".tmp", path)

    ns = time.perf_counter_ns
    timer, empty, step_float, step_tensor = [], [], [], []
    loss_t = (torch.ones(1, requires_grad=True) * 0.5).sum()  # a 0-dim loss with a grad_fn, like a real one
    k = 0  # step() calls in the current round; the H-th is the sync point
    while not diloco.finished:
        if args.touch == "all":
            with torch.no_grad():
                flat.mul_(1.0 - 1e-4)
        k += 1
        if args.time_steps and k < H:
            t0 = ns()
            t1 = ns()
            empty_call(loss=0.5, tokens=16)
            t2 = ns()
            if k % 2:
                event = diloco.step(loss=0.5, tokens=16)
            else:
                event = diloco.step(loss=loss_t, tokens=16)
            t3 = ns()
            timer.append(t1 - t0)
            empty.append(t2 - t1)
            (step_float if k % 2 else step_tensor).append(t3 - t2)
        else:
            if k == H and diloco.round == cfg.rounds:
                report()
            event = diloco.step(loss=0.5, tokens=16)
        if event != lh.NONE:
            if event in (lh.ROLLED_BACK, lh.RESYNCED):
                print(f"{tag} {event} at job step {diloco.job_step}", file=sys.stderr, flush=True)
            k = 0

    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The PyTorch twin of c_replay_worker.c: the same exact SGD steps through longhaul.torch.

Usage: replay_worker.py NUM_PARAMS [HOST_COPY_REGION [OTHER_START_REGION [OTHER_START_RANK]]]
With HOST_COPY_REGION, that region's workers go through a host copy of their
parameters, as they do for parameters on a GPU: their hashes must not change.
The workers of OTHER_START_REGION, or only its worker OTHER_START_RANK, build
other initial parameters, as a script that forgot to seed would.
"""
import sys

import torch

import longhaul.torch as lh

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
host_copy_region = int(sys.argv[2]) if len(sys.argv) > 2 else -1
other_start_region = int(sys.argv[3]) if len(sys.argv) > 3 else -1
other_start_rank = int(sys.argv[4]) if len(sys.argv) > 4 else -1
cfg = lh.job_config()
idx = torch.arange(n, dtype=torch.int64)


class Flat(torch.nn.Module):
    def __init__(self):
        super().__init__()
        other = cfg.region_index == other_start_region and other_start_rank in (-1, cfg.rank)
        mix = 41 if other else 37
        self.w = torch.nn.Parameter(((idx * mix) % 101 - 50).to(torch.float32) / 64.0)


model = Flat()
diloco = lh.DiLoCo(model, _host_copy=cfg.region_index == host_copy_region)
if diloco.resynced:
    # The model holds the first region's initial parameters now.
    seeded = ((idx * 37) % 101 - 50).to(torch.float32) / 64.0
    if not torch.equal(model.w.detach(), seeded):
        sys.exit("replay_worker: resynced at start, but the model does not hold the first region's parameters")
    print("replay_worker: resynced at start, holding the first region's parameters", file=sys.stderr)
while not diloco.finished:
    g = diloco.job_step + 1
    model.w.grad = ((idx * 7 + g * 3 + cfg.region_index * 5) % 17 - 8).to(torch.float32) / 4096.0
    diloco.sync_gradients()  # kind sync: the mean over the regions; otherwise unchanged
    with torch.no_grad():
        model.w -= model.w.grad
    event = diloco.step(loss=1.0, tokens=1)
    if event == lh.COMMITTED:
        print(f"committed round {diloco.committed_round}", file=sys.stderr)

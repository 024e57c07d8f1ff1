"""A model with BatchNorm through longhaul.torch: its running statistics must stay
identical across regions.

Usage: batchnorm_worker.py [OUT_DIR]

Each region sees data of its own distribution (shifted by its index), so each
region's BatchNorm running mean and variance move differently. The model's
buffers ride after its parameters in longhaul's flat tensor and are averaged at
every round's end. After every committed round (the last one included) the worker prints
  "round R val V running_mean M running_var S"
with the validation loss in eval mode (which uses the running statistics) and the
statistics' sums, in full precision: the test compares the regions' lines.

With OUT_DIR, the code after the training loop runs the way a user's final
evaluation and save would: a pass over a large held-out set (a noticeable
moment of work), then OUT_DIR/<region index>.txt with the last event, the
committed round and the same figures. On SIGTERM (the job was cancelled) it
writes OUT_DIR/<region index>.terminated with the committed round and exits 0.
"""
import os
import signal
import sys

import torch

import longhaul.torch as lh

IN, HIDDEN, CLASSES = 8, 16, 3

cfg = lh.job_config()
torch.manual_seed(cfg.seed)
model = torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.BatchNorm1d(HIDDEN), torch.nn.ReLU(),
                            torch.nn.Linear(HIDDEN, CLASSES))
bn = model[1]
loss_fn = torch.nn.CrossEntropyLoss()


def batch(region, step, size):
    g = torch.Generator().manual_seed(7919 * (region + 1) + step)
    x = torch.randn(size, IN, generator=g) * (1 + region) + 3.0 * region
    y = (x[:, 0] > 3.0 * region).long() + (x[:, 1] > 3.0 * region).long()
    return x, y


val = [batch(r, 10**6, 64) for r in range(3)]
val_x = torch.cat([v[0] for v in val])
val_y = torch.cat([v[1] for v in val])


def evaluate():
    model.eval()
    with torch.no_grad():
        loss = float(loss_fn(model(val_x), val_y))
    model.train()
    return loss


def on_sigterm(signum, frame):
    if len(sys.argv) > 1:
        with open(os.path.join(sys.argv[1], f"{cfg.region_index}.terminated"), "w") as f:
            f.write(f"terminated at committed round {diloco.committed_round}\n")
    sys.exit(0)


signal.signal(signal.SIGTERM, on_sigterm)
diloco = lh.DiLoCo(model, eval_fn=evaluate)
opt = torch.optim.AdamW(model.parameters(), lr=cfg.inner.lr)
printed = 0
while not diloco.finished:
    x, y = batch(cfg.region_index, diloco.job_step, cfg.inner.batch_size)
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    diloco.sync_gradients()
    opt.step()
    event = diloco.step(loss=loss, tokens=x.shape[0])
    if diloco.committed_round > printed:  # "committed", or "finished" after the last round
        printed = diloco.committed_round
        # One write per line: print() writes the text and the newline separately, and
        # the worker library's own log lines (other threads) can land in between.
        sys.stdout.write(f"round {diloco.committed_round} val {evaluate()!r} running_mean "
                         f"{float(bn.running_mean.sum())!r} running_var {float(bn.running_var.sum())!r}\n")
        sys.stdout.flush()

if len(sys.argv) > 1:
    held_out = [batch(r, 2 * 10**6 + i, 4096) for r in range(3) for i in range(100)]
    model.eval()
    with torch.no_grad():
        final = sum(float(loss_fn(model(x), y)) for x, y in held_out) / len(held_out)
    path = os.path.join(sys.argv[1], f"{cfg.region_index}.txt")
    with open(path + ".tmp", "w") as f:
        f.write(f"{event} round {diloco.committed_round} held-out {final!r} "
                f"running_mean {float(bn.running_mean.sum())!r}\n")
    os.replace(path + ".tmp", path)

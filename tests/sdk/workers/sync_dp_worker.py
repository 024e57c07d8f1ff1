"""Synchronous data parallelism through longhaul.torch, checked against one process.

As a longhaul worker (the agent starts it):
    sync_dp_worker.py OUT_DIR STEPS [FAIL_AT [OPTIMIZER [DTYPE]]]
  trains a small MLP in DTYPE (float32, the default, bfloat16, or mixed:
  the hidden layer in bfloat16, the output layer in float32) with
  OPTIMIZER (adamw, the default, or sgd: SGD with Nesterov momentum), given to
  DiLoCo, which carries its state (AdamW's moments, SGD's momentum buffers);
  every inner step it averages the gradients across regions with
  DiLoCo.sync_gradients() before opt.step(). At the start of job step STEPS
  (the job has more steps) it writes its parameters after STEPS steps, and the
  optimizer settings it used, with the global parameters (DiLoCo's
  state_dict()["theta"]), to OUT_DIR/<region index>.pt. With FAIL_AT, the
  last region fails job step FAIL_AT once, after its optimizer step: every
  region rolls the round back (parameters and optimizer state) and runs it
  again. That last region goes through a host copy of its parameters and
  optimizer state, as it does for a model on a GPU.

As the reference (the test runs it afterwards):
    sync_dp_worker.py --reference OUT_DIR STEPS REGIONS
  trains the same MLP in one process with the REGIONS batches of each step
  concatenated (batch REGIONS * b), then checks that every region's parameters
  are bitwise identical to each other and equal to its own to fp32 tolerance.
  Prints "max |difference| X"; exits 0 when they match, 1 otherwise.

For a job without a one-process twin (DiLoCo, or a 16-bit model):
    sync_dp_worker.py --identical OUT_DIR REGIONS
  checks that every region holds the same parameters, each in the dtype it
  trained in, that they are the global parameters rounded to those dtypes
  (which keep float32 precision unless the kind is sync), and that they moved
  from the initial ones. Exits 0 when so, 1 otherwise.
"""
import os
import sys

import torch

IN, HIDDEN, CLASSES = 16, 32, 4


class ToFloat32(torch.nn.Module):
    def forward(self, x):
        return x.float()


# DTYPE -> the dtype of the model's input.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "mixed": torch.bfloat16}


def build_model(seed, dtype="float32"):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, CLASSES))
    if dtype == "mixed":  # the parameters in the library's layout keep this order: bfloat16 ones first
        return torch.nn.Sequential(model[0].to(torch.bfloat16), model[1], ToFloat32(), model[2])
    return model.to(DTYPES[dtype])


def batch(region, step, size):
    """Region `region`'s batch of job step `step` (0-based): the same in every process."""
    g = torch.Generator().manual_seed(1000003 * (region + 1) + step)
    x = torch.randn(size, IN, generator=g)
    y = torch.randint(0, CLASSES, (size,), generator=g)
    return x, y


def make_optimizer(model, settings):
    if settings["optimizer"] == "sgd":
        return torch.optim.SGD(model.parameters(), lr=settings["lr"], momentum=0.9, nesterov=True,
                               weight_decay=settings["weight_decay"])
    return torch.optim.AdamW(model.parameters(), lr=settings["lr"], betas=tuple(settings["betas"]),
                             weight_decay=settings["weight_decay"], eps=1e-8)


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def tensors(model):
    return [p.detach().reshape(-1).clone() for p in model.parameters()]


def worker(out_dir, steps, fail_at, optimizer, dtype):
    import longhaul.torch as lh
    cfg = lh.job_config()
    settings = {"lr": cfg.inner.lr, "betas": [cfg.inner.beta1, cfg.inner.beta2],
                "weight_decay": cfg.inner.weight_decay, "batch": cfg.inner.batch_size, "seed": cfg.seed,
                "optimizer": optimizer, "dtype": dtype, "kind": cfg.sync.kind}
    model = build_model(cfg.seed, dtype)
    opt = make_optimizer(model, settings)
    last = cfg.region_index == cfg.region_count - 1
    diloco = lh.DiLoCo(model, optimizer=opt, _host_copy=last)
    fail = fail_at if last else -1
    loss_fn = torch.nn.CrossEntropyLoss()
    while not diloco.finished:
        step = diloco.job_step
        if step == steps:  # written before this step's exchange: the job cannot end first
            path = os.path.join(out_dir, f"{cfg.region_index}.pt")
            torch.save({"params": tensors(model), "theta": diloco.state_dict()["theta"], "settings": settings},
                       path + ".tmp")
            os.replace(path + ".tmp", path)
        x, y = batch(cfg.region_index, step, settings["batch"])
        x = x.to(DTYPES[dtype])
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        diloco.sync_gradients()
        opt.step()
        if step == fail:
            fail = -1
            diloco.fail_round("injected failure after the optimizer step")
            continue
        diloco.step(loss=loss, tokens=x.shape[0])
    return 0


def reference(out_dir, steps, regions):
    saved = [torch.load(os.path.join(out_dir, f"{r}.pt")) for r in range(regions)]
    settings = saved[0]["settings"]
    for r in range(1, regions):
        if not all(torch.equal(x, y) for x, y in zip(saved[r]["params"], saved[0]["params"])):
            print(f"region {r}'s parameters differ from region 0's: the replicas are not identical")
            return 1
    model = build_model(settings["seed"])
    opt = make_optimizer(model, settings)
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(steps):
        parts = [batch(r, step, settings["batch"]) for r in range(regions)]
        x = torch.cat([p[0] for p in parts])
        y = torch.cat([p[1] for p in parts])
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    mine = flat(model)
    diff = (mine - torch.cat(saved[0]["params"])).abs().max().item()
    moved = (mine - flat(build_model(settings["seed"]))).abs().max().item()
    print(f"max |difference| {diff:.3g} after {steps} steps (parameters moved by up to {moved:.3g}); "
          f"settings {settings}")
    return 0 if diff <= 1e-5 and moved > 1e-2 else 1


def identical(out_dir, regions):
    saved = [torch.load(os.path.join(out_dir, f"{r}.pt")) for r in range(regions)]
    settings = saved[0]["settings"]
    params, theta = saved[0]["params"], saved[0]["theta"]
    for r in range(1, regions):
        same = all(torch.equal(x, y) for x, y in zip(saved[r]["params"], params))
        if not same or not torch.equal(saved[r]["theta"], theta):
            print(f"region {r}'s parameters differ from region 0's: the replicas are not identical")
            return 1
    initial = tensors(build_model(settings["seed"], settings["dtype"]))
    dtypes = [p.dtype for p in params] == [p.dtype for p in initial]
    moved = max((p.float() - p0.float()).abs().max().item() for p, p0 in zip(params, initial))
    # theta, the global parameters in float32, in the library's layout (here the model's order).
    pieces = list(zip(params, torch.split(theta, [p.numel() for p in params])))
    rounded = all(torch.equal(p, t.to(p.dtype)) for p, t in pieces)
    # The outer step runs in float32: the global parameters of a 16-bit tensor
    # are not all on its grid (kind sync takes the parameters as they are).
    low = [(p, t) for p, t in pieces if p.dtype != torch.float32]
    finer = not low or settings["kind"] == "sync" or any(not torch.equal(t, t.to(p.dtype).float()) for p, t in low)
    names = " and ".join(sorted({str(p.dtype) for p in params}))
    print(f"parameters in {names}; the model holds the global parameters rounded: {rounded}; "
          f"they keep float32 precision: {finer}; moved by up to {moved:.3g}; settings {settings}")
    return 0 if dtypes and rounded and finer and moved > 1e-2 else 1


if __name__ == "__main__":
    if sys.argv[1] == "--identical":
        sys.exit(identical(sys.argv[2], int(sys.argv[3])))
    if sys.argv[1] == "--reference":
        sys.exit(reference(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    sys.exit(worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else -1,
                    sys.argv[4] if len(sys.argv) > 4 else "adamw", sys.argv[5] if len(sys.argv) > 5 else "float32"))

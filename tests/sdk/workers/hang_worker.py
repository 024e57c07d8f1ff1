"""A worker script that hangs: mode 'start' never joins the job, mode 'round' joins
and then blocks in its training loop."""
import sys
import time

if sys.argv[1] == "start":
    print("loading a dataset that never arrives", file=sys.stderr, flush=True)
    time.sleep(3600)

import torch  # noqa: E402

import longhaul.torch as lh  # noqa: E402

model = torch.nn.Linear(4, 4)
diloco = lh.DiLoCo(model)
print("joined; now waiting on a lock nobody releases", file=sys.stderr, flush=True)
time.sleep(3600)

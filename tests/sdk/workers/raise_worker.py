"""A worker script with a bug: it joins the job, then raises in its training loop."""
import torch

import longhaul.torch as lh

model = torch.nn.Linear(4, 4)
diloco = lh.DiLoCo(model)
steps = 0
while not diloco.finished:
    steps += 1
    if steps == 3:
        raise RuntimeError("the user's training loop broke at step 3 (tokenizer exploded)")
    diloco.step(loss=1.0)

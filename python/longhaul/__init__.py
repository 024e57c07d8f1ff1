"""longhaul: train one model across datacenters.

`longhaul.torch` turns a PyTorch training loop into a longhaul worker (see
longhaul/torch.py); `longhaul.job_config()` is the job as the agent gave it.
"""

from .config import JobConfig, job_config

__all__ = ["JobConfig", "job_config"]

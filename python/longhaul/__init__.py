"""longhaul: train one model across datacenters.

`longhaul.torch` turns a PyTorch training loop into a longhaul worker (see
longhaul/torch.py); `longhaul.job_config()` is the job as the agent gave it.
"""

from . import errors
from .config import JobConfig, job_config
from .errors import LonghaulError

__all__ = ["JobConfig", "LonghaulError", "errors", "job_config"]

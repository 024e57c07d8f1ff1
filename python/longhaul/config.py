"""The job spec as a worker program sees it (read-only, attribute access).

The agent writes the job's assignment and points the worker at it through the
LONGHAUL_* environment; job_config() reads it without connecting to anything,
so a script can size its model and optimizer before it joins the job.
"""

import json

_cached = None


class JobConfig:
    """Nested, read-only view of a JSON object: cfg.sync.inner_steps, cfg.inner.lr.

    Sections the job does not have are None (cfg.data.text_file for synthetic data).
    """

    def __init__(self, fields):
        object.__setattr__(self, "_fields", {k: _wrap(v) for k, v in fields.items()})

    def __getattr__(self, name):
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(f"the job config has no field '{name}' (fields: {', '.join(sorted(self._fields))})") from None

    def __setattr__(self, name, value):
        raise AttributeError("the job config is read-only: the job spec is the one source of truth")

    def __getitem__(self, name):
        return self._fields[name]

    def __contains__(self, name):
        return name in self._fields

    def to_dict(self):
        return {k: (v.to_dict() if isinstance(v, JobConfig) else v) for k, v in self._fields.items()}

    def __repr__(self):
        return f"JobConfig({self.to_dict()!r})"


def _wrap(v):
    return JobConfig(v) if isinstance(v, dict) else v


def from_json(text):
    return JobConfig(json.loads(text))


def job_config():
    """The job this worker belongs to. Raises LonghaulError outside a longhaul job."""
    global _cached
    if _cached is None:
        from . import _native

        _cached = from_json(_native.job_config_json())
    return _cached

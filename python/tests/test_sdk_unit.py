"""longhaul's Python package without an agent: parameter flattening, the job
config view, errors outside a job, and the native module's pieces."""
import json
import os

import pytest
import torch

import longhaul
import longhaul.torch as lh
from longhaul import _native
from longhaul.config import from_json


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 4)
        self.b = torch.nn.Linear(4, 2, bias=False)


def test_flatten_makes_every_parameter_a_view_of_one_buffer_without_changing_values():
    torch.manual_seed(0)
    m = Tiny()
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    opt = torch.optim.SGD(m.parameters(), lr=0.1)  # created before: still steps the same tensors
    flat, tensors = lh.flatten_parameters(m)
    assert flat.numel() == sum(t.numel() for t in before.values())
    assert [t[0] for t in tensors] == ["a.weight", "a.bias", "b.weight"]
    for (name, shape, offset, numel), (n, p) in zip(tensors, m.named_parameters()):
        assert name == n and list(p.shape) == shape
        assert torch.equal(p.detach(), before[n])
        assert p.data_ptr() == flat.data_ptr() + 4 * offset  # zero-copy: a view into flat
    # An optimizer step writes through to the flat buffer the session reads.
    m.b(m.a(torch.ones(1, 3))).sum().backward()
    opt.step()
    assert not torch.equal(flat[: 12].view(4, 3), before["a.weight"])
    assert torch.equal(flat[: 12].view(4, 3), m.a.weight.detach())


def test_flatten_refuses_parameters_it_cannot_carry():
    m = torch.nn.Linear(2, 2).to(torch.float64)
    with pytest.raises(TypeError, match="float32"):
        lh.flatten_parameters(m)
    with pytest.raises(ValueError, match="no parameters"):
        lh.flatten_parameters(torch.nn.ReLU())


def test_job_config_is_a_read_only_nested_view():
    cfg = from_json(json.dumps({"sync": {"kind": "diloco", "inner_steps": 50},
                                "data": {"text_file": None}, "seed": 7}))
    assert cfg.sync.inner_steps == 50 and cfg.seed == 7
    assert cfg.data.text_file is None
    with pytest.raises(AttributeError, match="read-only"):
        cfg.seed = 8
    with pytest.raises(AttributeError, match="no field 'inner'"):
        cfg.inner
    assert cfg.to_dict()["sync"]["kind"] == "diloco"


def test_outside_a_job_the_sdk_says_so(monkeypatch):
    for k in list(os.environ):
        if k.startswith("LONGHAUL_"):
            monkeypatch.delenv(k)
    with pytest.raises(lh.LonghaulError, match="LONGHAUL_AGENT_ENDPOINT is not set"):
        _native.job_config_json()
    with pytest.raises(lh.LonghaulError, match="started by a longhaul agent"):
        lh.DiLoCo(Tiny())


def test_a_bad_environment_variable_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("LONGHAUL_AGENT_ENDPOINT", "tcp://127.0.0.1:1")
    monkeypatch.setenv("LONGHAUL_ASSIGNMENT", str(tmp_path / "missing.pb"))
    monkeypatch.setenv("LONGHAUL_REGION", "eu")
    monkeypatch.setenv("LONGHAUL_RANK", "zero")
    with pytest.raises(lh.LonghaulError, match="LONGHAUL_RANK must be an integer"):
        _native.job_config_json()
    monkeypatch.setenv("LONGHAUL_RANK", "0")
    monkeypatch.setenv("LONGHAUL_STORE_DIR", str(tmp_path))
    monkeypatch.setenv("LONGHAUL_INSECURE", "1")
    with pytest.raises(lh.LonghaulError, match="cannot read the job assignment"):
        _native.job_config_json()


def test_parameter_hash_matches_the_one_rounds_report():
    t = torch.arange(10, dtype=torch.float32)
    h1 = _native.parameter_hash(t.data_ptr(), t.numel())
    t[3] += 1
    assert _native.parameter_hash(t.data_ptr(), t.numel()) != h1
    t[3] -= 1
    assert _native.parameter_hash(t.data_ptr(), t.numel()) == h1


def test_package_exports():
    assert longhaul.job_config is lh.job_config
    assert {lh.NONE, lh.COMMITTED, lh.ROLLED_BACK, lh.RESYNCED, lh.FINISHED} == {
        "none", "committed", "rolled_back", "resynced", "finished"}

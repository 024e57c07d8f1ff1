"""longhaul's Python package without an agent: parameter flattening, the job
config view, errors outside a job, and the native module's pieces."""
import copy
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


class WithBatchNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)
        self.bn = torch.nn.BatchNorm1d(4)


def test_float_buffers_follow_the_parameters_in_the_flat_tensor_and_training_updates_them_there():
    torch.manual_seed(0)
    m = WithBatchNorm()
    layout = lh._flatten(m, with_buffers=True)
    (part,) = layout.parts
    flat = part.flat
    names = [t[0] for t in layout.tensors]
    assert names == ["lin.weight", "lin.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"]
    assert layout.buffer_floats == 8  # num_batches_tracked (int64) is not carried
    m.bn(m.lin(torch.randn(16, 3) + 5))  # a training-mode forward moves the running statistics in place
    assert torch.equal(flat[-8:-4], m.bn.running_mean)
    assert float(flat[-8:-4].abs().sum()) > 0


# Every optimizer longhaul carries, in the settings that change which state it
# keeps, with the number of flat state tensors binding it gives.
OPTIMIZERS = {
    "AdamW": (lambda a, b: torch.optim.AdamW(a + b, lr=0.01), 2),
    "AdamW amsgrad": (lambda a, b: torch.optim.AdamW(a + b, lr=0.01, amsgrad=True), 3),
    "Adam weight decay": (lambda a, b: torch.optim.Adam(a + b, lr=0.01, weight_decay=0.01), 2),
    "Adamax": (lambda a, b: torch.optim.Adamax(a + b, lr=0.01), 2),
    "NAdam": (lambda a, b: torch.optim.NAdam(a + b, lr=0.01), 2),
    "RAdam": (lambda a, b: torch.optim.RAdam(a + b, lr=0.01), 2),
    "Adagrad": (lambda a, b: torch.optim.Adagrad(a + b, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1), 1),
    "Adadelta": (lambda a, b: torch.optim.Adadelta(a + b, lr=1.0), 2),
    "RMSprop centered momentum": (lambda a, b: torch.optim.RMSprop(a + b, lr=0.01, momentum=0.9, centered=True), 3),
    "SGD nesterov": (lambda a, b: torch.optim.SGD(a + b, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4), 1),
    "SGD two groups": (lambda a, b: torch.optim.SGD([{"params": a, "momentum": 0.9}, {"params": b}], lr=0.1), 1),
}


def _twins(kind, dtype=torch.float32):
    torch.manual_seed(0)
    a, b = Tiny().to(dtype), Tiny().to(dtype)
    b.load_state_dict(a.state_dict())
    make = OPTIMIZERS[kind][0]
    opt_a = make(list(a.a.parameters()), list(a.b.parameters()))
    opt_b = make(list(b.a.parameters()), list(b.b.parameters()))
    return a, opt_a, b, opt_b


def _train(m, opt, steps, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        opt.zero_grad()
        x = torch.randn(5, 3, generator=g).to(m.a.weight.dtype)
        m.b(m.a(x)).pow(2).sum().backward()
        opt.step()


def _same_parameters(a, b):
    return all(torch.equal(pa, pb) for pa, pb in zip(a.parameters(), b.parameters()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("before", [0, 2], ids=["bound before its first step", "bound after two steps"])
@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_bound_optimizer_state_lives_in_flat_tensors_and_steps_exactly_like_a_plain_one(kind, before, dtype):
    a, opt_a, b, opt_b = _twins(kind, dtype)
    flat, tensors = lh.flatten_parameters(a)
    assert flat.dtype == dtype
    _train(a, opt_a, before, seed=1)  # state before binding is kept
    _train(b, opt_b, before, seed=1)
    params = [p for _, p in a.named_parameters()]
    state = lh.bind_optimizer_state(opt_a, tensors, params, flat.numel())
    assert len(state) == OPTIMIZERS[kind][1]
    assert all(t.dtype == dtype for t in state)  # as torch.optim keeps it
    _train(a, opt_a, 3, seed=2)
    _train(b, opt_b, 3, seed=2)
    assert _same_parameters(a, b)
    # Every per-parameter state tensor is still a view of its flat tensor, and
    # holds what the plain optimizer holds.
    for pa, pb in zip(a.parameters(), b.parameters()):
        for name, value in opt_b.state[pb].items():
            if isinstance(value, torch.Tensor) and value.shape == pa.shape:
                mine = opt_a.state[pa][name]
                assert torch.equal(mine, value), name
                assert any(f.data_ptr() <= mine.data_ptr() < f.data_ptr() + f.element_size() * f.numel()
                           for f in state), name

    # What a rollback does: the flat state and the parameters put back, the
    # step counter (and what follows from it) set from the job step; the
    # retried steps then match exactly.
    saved_state = [t.clone() for t in state]
    saved_p = flat.clone()
    _train(a, opt_a, 2, seed=3)
    for t, s in zip(state, saved_state):
        t.copy_(s)
    with torch.no_grad():
        flat.copy_(saved_p)
    lh.follow_step(opt_a, before + 3)
    _train(a, opt_a, 2, seed=3)
    _train(b, opt_b, 2, seed=3)
    assert _same_parameters(a, b)


def test_binding_refuses_optimizers_it_cannot_carry_and_foreign_tensors():
    m = Tiny()
    flat, tensors = lh.flatten_parameters(m)
    params = list(m.parameters())
    for other in (torch.optim.Rprop(params), torch.optim.LBFGS(params)):
        with pytest.raises(TypeError, match=f"SGD, not {type(other).__name__}; pass optimizer=None"):
            lh.bind_optimizer_state(other, tensors, params, flat.numel())
    with pytest.raises(ValueError, match="SGD with dampening"):
        lh.bind_optimizer_state(torch.optim.SGD(params, lr=0.1, momentum=0.9, dampening=0.1), tensors, params,
                                flat.numel())
    stranger = torch.nn.Parameter(torch.zeros(2))
    with pytest.raises(ValueError, match="not a parameter of the model"):
        lh.bind_optimizer_state(torch.optim.AdamW(params + [stranger]), tensors, params, flat.numel())


def test_a_dampened_sgd_that_has_stepped_is_carried():
    a, _, b, _ = _twins("AdamW")
    opt_a = torch.optim.SGD(a.parameters(), lr=0.1, momentum=0.9, dampening=0.5)
    opt_b = torch.optim.SGD(b.parameters(), lr=0.1, momentum=0.9, dampening=0.5)
    flat, tensors = lh.flatten_parameters(a)
    _train(a, opt_a, 1, seed=1)
    _train(b, opt_b, 1, seed=1)
    lh.bind_optimizer_state(opt_a, tensors, list(a.parameters()), flat.numel())
    _train(a, opt_a, 3, seed=2)
    _train(b, opt_b, 3, seed=2)
    assert _same_parameters(a, b)


def test_nadam_momentum_products_are_torchs_at_any_step_in_any_order():
    torch.manual_seed(0)
    m = Tiny()
    opt = torch.optim.NAdam(m.parameters(), lr=0.01, momentum_decay=5e-3)
    seen = [1.0]
    for i in range(60):
        _train(m, opt, 1, seed=i)
        seen.append(opt.state[m.a.weight]["mu_product"].item())
    group = opt.param_groups[0]
    for step in (30, 10, 60, 0, 59, 31):  # a rollback looks back, a commit or rejoin forward
        assert lh._nadam_scalars(group, step)["mu_product"].item() == seen[step], step
    # The product reaches a fixed point (0 or float32's least subnormal) within
    # a few thousand steps and stays there: a job at step 10^7 needs no table of
    # 10^7 entries, and torch's own product stops there too.
    for _ in range(2000):
        _train(m, opt, 1, seed=7)
    at_fixed_point = opt.state[m.a.weight]["mu_product"].item()
    assert at_fixed_point < 1e-44
    assert lh._nadam_scalars(group, 10 ** 7)["mu_product"].item() == at_fixed_point
    assert lh._nadam_scalars(group, 2060)["mu_product"].item() == at_fixed_point
    assert len(lh._NADAM_PRODUCTS[(0.9, 5e-3)]) < 2000


def _config(first, second):
    return from_json(json.dumps({"inner": {"first_moment_sync_rounds": first, "second_moment_sync_rounds": second}}))


def test_a_job_that_averages_inner_moments_refuses_an_optimizer_without_adams_moments():
    m = Tiny()
    for kind in (torch.optim.Adam, torch.optim.AdamW, torch.optim.NAdam, torch.optim.RAdam):
        lh.check_moment_sync(_config(2, 1), kind(m.parameters()))
    lh.check_moment_sync(_config(0, 1), None)
    lh.check_moment_sync(_config(0, 0), torch.optim.RMSprop(m.parameters()))
    for other in (torch.optim.RMSprop(m.parameters(), centered=True), torch.optim.Adamax(m.parameters()),
                  torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)):
        name = type(other).__name__
        with pytest.raises(lh.errors.InvalidArgument,
                           match=f"second_moment_sync_rounds 1\\), which needs Adam's .*: {name} keeps"):
            lh.check_moment_sync(_config(0, 1), other)


def test_aliasing_problems_are_named_and_a_bound_model_has_none():
    torch.manual_seed(0)
    m = Tiny()
    m.scale = torch.nn.Parameter(torch.tensor(2.0))  # a 0-d parameter: its step counter has its shape
    flat, tensors = lh.flatten_parameters(m)
    params = list(m.parameters())
    opt = torch.optim.AdamW(params, lr=0.01)
    state = lh.bind_optimizer_state(opt, tensors, params, flat.numel())
    _train(m, opt, 2, seed=1)
    assert lh.aliasing_problem([flat], flat.data_ptr(), params, opt, state) is None
    assert "moved with .to() or .share_memory()" in lh.aliasing_problem([flat], flat.data_ptr() + 4, params, opt,
                                                                        state)
    saved = opt.state_dict()
    opt.load_state_dict(saved)  # copies: the state is no longer longhaul's views
    problem = lh.aliasing_problem([flat], flat.data_ptr(), params, opt, state)
    assert "optimizer.load_state_dict() called, or a parameter group added," in problem
    # Through a host copy the library holds the copy's address: the flat tensor may move with its views.
    assert lh.aliasing_problem([flat], None, params, None, []) is None
    empty = torch.nn.Parameter(torch.zeros(0))  # data_ptr() 0: not a sign of anything
    assert lh.aliasing_problem([flat], flat.data_ptr(), [empty] + params, None, []) is None
    m.a.weight.data = m.a.weight.data.clone()
    assert "no longer live in longhaul's flat buffer" in lh.aliasing_problem([flat], flat.data_ptr(), params, None,
                                                                             [])


def test_flatten_refuses_parameters_it_cannot_carry():
    m = torch.nn.Linear(2, 2).to(torch.float64)
    with pytest.raises(TypeError, match="'weight' is torch.float64; longhaul carries float32, bfloat16 or float16"):
        lh.flatten_parameters(m)
    mixed = Tiny()
    mixed.b.to(torch.bfloat16)
    with pytest.raises(TypeError, match="'b.weight' is torch.bfloat16 and 'a.weight' torch.float32; "
                                        "flatten_parameters gives one tensor of one dtype"):
        lh.flatten_parameters(mixed)
    with pytest.raises(ValueError, match="no parameters"):
        lh.flatten_parameters(torch.nn.ReLU())


def test_flatten_refuses_parameters_on_two_devices_and_keeps_the_flat_tensor_on_theirs():
    m = Tiny()
    m.b = torch.nn.Linear(4, 2, bias=False, device="meta")
    with pytest.raises(TypeError, match="'b.weight' is on meta and 'a.weight' on cpu; .* on one device"):
        lh.flatten_parameters(m)
    on_meta = torch.nn.Linear(3, 4, device="meta")
    flat, _ = lh.flatten_parameters(on_meta)
    assert flat.device.type == "meta" and on_meta.weight.device.type == "meta"


def _host_copy(flat, state):
    """The host copy of one flat tensor laid out as the library's array."""
    return lh._HostCopy([(flat, [(0, 0, flat.numel())])], [state])


def test_the_host_copy_of_parameters_and_optimizer_state_copies_both_ways_only_when_asked():
    flat = torch.arange(6, dtype=torch.float32)
    state = [torch.full((6,), 2.0), torch.full((6,), 3.0)]
    h = _host_copy(flat, state)
    assert torch.equal(h.host, flat) and h.host.data_ptr() != flat.data_ptr()
    assert [torch.equal(a, b) for a, b in zip(h.host_state, state)] == [True, True]
    flat.add_(1)  # training moves the originals; the host copy waits for to_host()
    assert not torch.equal(h.host, flat)
    h.to_host()
    assert torch.equal(h.host, flat)
    h.host.zero_()
    h.host_state[1].fill_(7.0)
    h.to_device()
    h.state_to_device()
    assert float(flat.abs().sum()) == 0 and float(state[1][0]) == 7.0 and float(state[0][0]) == 2.0
    state[0].fill_(5.0)
    h.state_to_host()
    assert float(h.host_state[0][3]) == 5.0


def test_a_bfloat16_model_is_carried_in_one_bfloat16_tensor_with_its_buffers_of_that_dtype():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)).to(torch.bfloat16)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    (part,) = lh._flatten(m, with_buffers=True).parts
    flat, buffers = part.flat, part.buffers
    assert flat.dtype == torch.bfloat16
    assert [name for name, _ in buffers] == ["1.running_mean", "1.running_var"]  # not num_batches_tracked
    for k, v in m.state_dict().items():
        assert torch.equal(v, before[k]), k
    lo, hi = flat.data_ptr(), flat.data_ptr() + 2 * flat.numel()
    assert all(lo <= t.data_ptr() < hi for t in list(m.parameters()) + [b for _, b in buffers])


class Mixed(torch.nn.Module):
    """bfloat16 layers around a float32 BatchNorm, as models that keep their
    norms in float32 are loaded in bfloat16; a float16 buffer no parameter
    shares a dtype with (not carried)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 4).to(torch.bfloat16)
        self.bn = torch.nn.BatchNorm1d(4).to(torch.bfloat16)
        self.norm = torch.nn.BatchNorm1d(4)
        self.b = torch.nn.Linear(4, 2, bias=False).to(torch.bfloat16)
        self.register_buffer("scale16", torch.ones(2, dtype=torch.float16))

    def forward(self, x):
        h = self.bn(self.a(x.to(torch.bfloat16)))
        return self.b(self.norm(h.float()).to(torch.bfloat16)).float()


def _same_floats(a, b):
    """The models' parameters and floating buffers are equal (counters are not carried)."""
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values())
               if x.is_floating_point())


def test_a_model_mixing_dtypes_is_carried_in_one_flat_tensor_per_dtype_and_one_float32_layout():
    torch.manual_seed(0)
    m = Mixed()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    layout = lh._flatten(m, with_buffers=True)
    bf16, fp32 = layout.parts  # in the order their dtypes first appear
    assert (bf16.flat.dtype, fp32.flat.dtype) == (torch.bfloat16, torch.float32)
    # The library's array: every part's parameters, then every part's buffers.
    assert [(name, offset, n) for name, _, offset, n in layout.tensors] == [
        ("a.weight", 0, 12), ("a.bias", 12, 4), ("bn.weight", 16, 4), ("bn.bias", 20, 4), ("b.weight", 24, 8),
        ("norm.weight", 32, 4), ("norm.bias", 36, 4),
        ("bn.running_mean", 40, 4), ("bn.running_var", 44, 4), ("norm.running_mean", 48, 4),
        ("norm.running_var", 52, 4)]
    assert layout.numel == 56 and layout.buffer_floats == 16
    assert layout.params == [m.a.weight, m.a.bias, m.bn.weight, m.bn.bias, m.b.weight, m.norm.weight, m.norm.bias]
    assert bf16.segments() == [(0, 0, 32), (32, 40, 8)] and fp32.segments() == [(0, 32, 8), (8, 48, 8)]
    for k, v in m.state_dict().items():
        assert torch.equal(v, before[k]), k
    for part in layout.parts:  # every tensor a view of its dtype's flat tensor
        lo, hi = lh._spans([part.flat])[0]
        assert all(lo <= t.data_ptr() < hi and t.dtype == part.dtype for _, t in part.params + part.buffers)
    refused = Mixed()
    where = [p.data_ptr() for p in refused.parameters()]
    with pytest.raises(TypeError, match="'norm.weight' is torch.float32 and 'a.weight' torch.bfloat16; "
                                        "flatten_parameters gives one tensor of one dtype"):
        lh.flatten_parameters(refused)
    assert [p.data_ptr() for p in refused.parameters()] == where  # refused before anything moved


def test_a_model_mixing_dtypes_steps_like_a_plain_one_through_its_host_copy_and_rolls_back_exactly():
    torch.manual_seed(0)
    a, b = Mixed(), Mixed()
    b.load_state_dict(a.state_dict())
    opt_a, opt_b = (torch.optim.AdamW(m.parameters(), lr=0.01) for m in (a, b))
    layout = lh._flatten(a, with_buffers=True)
    state_parts = lh._bind_parts(opt_a, layout.parts)
    assert [[t.dtype for t in state] for state in state_parts] == [[torch.bfloat16] * 2, [torch.float32] * 2]
    h = lh._HostCopy([(part.flat, part.segments()) for part in layout.parts], state_parts)

    def train(steps, seed):
        for m, opt in ((a, opt_a), (b, opt_b)):
            g = torch.Generator().manual_seed(seed)
            for _ in range(steps):
                opt.zero_grad()
                m(torch.randn(6, 3, generator=g)).pow(2).sum().backward()
                opt.step()

    train(2, seed=1)
    assert _same_floats(a, b)
    # A round's start: the library copies parameters and state, each tensor at
    # its place in the library's layout, exact in float32.
    h.to_host()
    h.state_to_host()
    named = dict(a.named_parameters(), **dict(a.named_buffers()))
    for name, _, offset, n in layout.tensors:
        assert torch.equal(h.host[offset:offset + n], named[name].detach().float().reshape(-1)), name
        if name in dict(a.named_parameters()):
            for k, key in enumerate(("exp_avg", "exp_avg_sq")):
                assert torch.equal(h.host_state[k][offset:offset + n],
                                   opt_a.state[named[name]][key].float().reshape(-1)), (name, key)
    # A rollback puts them back.
    saved, saved_state = h.host.clone(), [t.clone() for t in h.host_state]
    b_saved = {k: v.clone() for k, v in b.state_dict().items()}
    opt_b_saved = copy.deepcopy(opt_b.state_dict())
    train(3, seed=2)
    h.host.copy_(saved)
    for t, v in zip(h.host_state, saved_state):
        t.copy_(v)
    h.to_device()
    h.state_to_device()
    lh.follow_step(opt_a, 2)
    b.load_state_dict(b_saved)
    opt_b.load_state_dict(opt_b_saved)
    train(3, seed=2)
    assert _same_floats(a, b)
    flats, states = [part.flat for part in layout.parts], [t for state in state_parts for t in state]
    assert lh.aliasing_problem(flats, None, layout.params, opt_a, states) is None
    a.norm.weight.data = a.norm.weight.data.clone()  # one part's parameter leaves its flat tensor
    assert "no longer live in longhaul's flat buffer" in lh.aliasing_problem(flats, None, [a.norm.weight], None, [])


@pytest.mark.parametrize("dtype, mantissa_bits", [(torch.bfloat16, 7), (torch.float16, 10)],
                         ids=["bfloat16", "float16"])
def test_the_host_copy_of_a_16_bit_tensor_is_exact_to_the_host_and_rounds_to_nearest_even_back(dtype, mantissa_bits):
    flat = torch.tensor([1.0, -2.5, 3.140625, 0.0], dtype=dtype)
    state = [torch.tensor([0.5, 0.25, 0.125, 1.0], dtype=dtype)]
    h = _host_copy(flat, state)
    assert h.host.dtype == torch.float32 and h.host_state[0].dtype == torch.float32
    assert torch.equal(h.host, flat.float()) and torch.equal(h.host_state[0], state[0].float())
    # 1 + ulp/2 lies halfway between 1 and 1 + ulp: it goes to the even one, 1;
    # 1 + 3 ulp/4 goes to the nearer, 1 + ulp.
    ulp = 2.0 ** -mantissa_bits
    h.host.copy_(torch.tensor([1.0 + ulp / 2, 1.0 + 3 * ulp / 4, 7.0, -0.1]))
    h.to_device()
    assert flat.tolist() == [1.0, 1.0 + ulp, 7.0, float(torch.tensor(-0.1).to(dtype))]
    assert torch.equal(flat, h.host.to(dtype))
    h.host_state[0].copy_(torch.tensor([1.0 + ulp / 2, 0.0, 0.0, 0.0]))
    h.state_to_device()
    assert state[0].tolist() == [1.0, 0.0, 0.0, 0.0]


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
    with pytest.raises(lh.errors.FailedPrecondition, match="LONGHAUL_AGENT_ENDPOINT is not set") as e:
        _native.job_config_json()
    assert isinstance(e.value, lh.LonghaulError) and e.value.code == 4 and e.value.code_name == "FAILED_PRECONDITION"
    with pytest.raises(lh.LonghaulError, match="started by a longhaul agent"):
        lh.DiLoCo(Tiny())


def test_a_bad_environment_variable_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("LONGHAUL_AGENT_ENDPOINT", "tcp://127.0.0.1:1")
    monkeypatch.setenv("LONGHAUL_JOB_ID", "job")
    monkeypatch.setenv("LONGHAUL_REGION", "eu")
    monkeypatch.setenv("LONGHAUL_RANK", "zero")
    with pytest.raises(lh.errors.InvalidArgument, match="LONGHAUL_RANK must be an integer"):
        _native.job_config_json()
    monkeypatch.setenv("LONGHAUL_RANK", "0")
    monkeypatch.setenv("LONGHAUL_INSECURE", "1")
    monkeypatch.setenv("LONGHAUL_COLLECTIVE_TIMEOUT_MS", "300")
    monkeypatch.setenv("LONGHAUL_LINK_IO_TIMEOUT_MS", "100")
    # Nothing answers on the agent's socket: the assignment never comes.
    with pytest.raises(lh.LonghaulError, match="the agent at tcp://127.0.0.1:1 did not answer within 300 ms"):
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


def test_every_status_code_has_its_error_class_with_the_c_abi_value():
    import re
    header = os.path.join(os.path.dirname(__file__), "..", "..", "worker", "include", "longhaul", "session", "c_api.h")
    with open(header) as f:
        text = f.read()
    status_enum = text[text.index("/* Status codes"):text.index("/* Events")]
    codes = {name: int(value) for name, value in re.findall(r"LH_([A-Z_]+) = (\d+)", status_enum)}
    assert codes.pop("OK") == 0
    assert len(codes) == len(lh.errors.BY_CODE) == 13
    for name, value in codes.items():
        cls = lh.errors.error_class(value)
        assert cls.code == value and cls.code_name == name
        assert issubclass(cls, lh.LonghaulError) and issubclass(cls, RuntimeError)
    assert lh.errors.error_class(99) is lh.LonghaulError
    assert longhaul.LonghaulError is lh.LonghaulError is _native.LonghaulError

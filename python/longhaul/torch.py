"""longhaul.torch: a PyTorch training loop as a longhaul worker.

    import longhaul.torch as lh

    cfg = lh.job_config()                    # the job spec: H, lr, seed, data, ...
    torch.manual_seed(cfg.seed)              # identical initial parameters everywhere
    model = MyModel()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.inner.lr)
    diloco = lh.DiLoCo(model, optimizer=opt) # join the job: the model holds the global params
    while not diloco.finished:
        loss = model(batch()); opt.zero_grad(); loss.backward()
        diloco.sync_gradients()              # sync kind: the mean over all regions; else a no-op
        opt.step()
        diloco.step(loss=loss)               # a no-op except at the job's sync points

H, the outer optimizer, the codec, fragments and overlap come from the job spec;
the script does not restate them. At a sync point step() runs the outer step over
the WAN and returns what happened:

  "none"         an inner step like any other
  "committed"    the round committed: the model holds the new global parameters
  "rolled_back"  the round aborted (a region failed): the model is back at the last
                 committed parameters and the same round runs again
  "resynced"     this region rejoined and received the global parameters and outer
                 state from a live one (reset schedules from `job_step`)
  "finished"     the job is over: after its last round committed the model holds
                 the final parameters (after a stop, the last committed ones). The
                 script's code after the loop (a final evaluation, torch.save) runs:
                 the agent waits worker.exit_grace_s (default 60) for the process
                 to exit before it sends SIGTERM.

The parameters are carried without copies: DiLoCo makes every parameter a view of
one flat tensor per dtype (float32, bfloat16 or float16; a model may mix them)
that stays where it is; they must be on one device. A float32 model on the CPU
is one flat tensor that the worker library reads and writes in place. On a GPU,
in bfloat16 or float16, or in several dtypes, the worker library works on one
float32 host copy (pinned memory on a GPU), refreshed only around the job's
sync points (the round's start and end, a fragment's exchange): no inner step
copies the model to the host. The outer step (global parameters,
pseudo-gradients, outer momentum) is float32 either way; a bfloat16 parameter
receives the global parameters rounded to its dtype. The model's buffers of
the parameters' dtypes (BatchNorm's running mean and variance) follow the
parameters in the flat tensor of their dtype: they take no outer step, and at
every round's end (every kind but local) they are averaged over all workers of
all regions, so every replica holds the same statistics and the parameter hash
covers them.
Buffers of other types (BatchNorm's num_batches_tracked counter) are not
carried; every region counts the same steps.

Given the optimizer, DiLoCo makes its per-parameter state views of flat tensors
too (Adam, AdamW, Adamax, NAdam, RAdam, Adagrad, Adadelta, RMSprop, SGD; their
moments, momentum buffers and running averages): a rolled-back round restores
them with the parameters, a region that joins a sync job receives the live
regions' state (so every region keeps taking the same step), and the
optimizer's step counter follows job_step. Another optimizer is refused by name
(pass optimizer=None). Without the optimizer its state is the script's alone:
not rolled back, and a region that rejoins a sync job starts from fresh state
while the others do not, so its replicas disagree.
Several workers per region: the agent sets
torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so
torch.distributed.init_process_group("gloo") works; average the gradients inside
the region as usual (create DDP after DiLoCo). Every worker carries its shard of
the parameters over the WAN.
"""

import torch

from . import _native, errors
from .config import JobConfig, from_json, job_config
from .errors import LonghaulError

NONE = "none"
COMMITTED = "committed"
ROLLED_BACK = "rolled_back"
RESYNCED = "resynced"
FINISHED = "finished"

__all__ = ["DiLoCo", "JobConfig", "LonghaulError", "errors", "job_config", "flatten_parameters", "bind_optimizer_state",
           "follow_step", "NONE", "COMMITTED", "ROLLED_BACK", "RESYNCED", "FINISHED"]


def flatten_parameters(model):
    """Moves the model's parameters into one flat tensor of their dtype and makes each a view of it.

    Returns (flat, tensors) where tensors lists (name, shape, offset, numel) in order.
    The values are unchanged; optimizers created before or after keep working
    (the Parameter objects stay the same, only their storage moves). The
    parameters must share one dtype (DiLoCo also takes a model that mixes them).
    """
    layout = _flatten(model, with_buffers=False, one_dtype="flatten_parameters")
    return layout.parts[0].flat, layout.tensors


# The parameter dtypes longhaul carries; the worker library works on float32
# (a host copy converts the others).
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class _Part:
    """The model's carried tensors of one dtype: one flat tensor of that dtype
    holding its parameters, then its buffers; param_at and buffer_at are where
    the two ranges lie in the worker library's float32 layout."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.params, self.buffers = [], []  # (name, tensor), in the model's order
        self.flat = None
        self.param_at = self.buffer_at = 0

    def param_floats(self):
        return sum(t.numel() for _, t in self.params)

    def param_offsets(self):
        """(parameter, its offset in flat), in order."""
        offset = 0
        for _, t in self.params:
            yield t, offset
            offset += t.numel()

    def segments(self):
        """(offset in flat, offset in the library's layout, count) of its two ranges."""
        n = self.param_floats()
        return [(0, self.param_at, n), (n, self.buffer_at, self.flat.numel() - n)]


class _Layout:
    """A model's parameters and carried buffers as the worker library sees them:
    one float32 array holding every part's parameters, then every part's buffers
    (parts in the order their dtypes first appear). tensors: (name, shape,
    offset, numel) in that order; params: the parameters in that order."""

    def __init__(self, parts):
        self.parts = parts
        self.tensors, self.params = [], []
        offset = 0
        for part in parts:
            part.param_at = offset
            offset = self._place(part.params, offset)
            self.params += [t for _, t in part.params]
        for part in parts:
            part.buffer_at = offset
            offset = self._place(part.buffers, offset)
        self.numel = offset
        self.buffer_floats = sum(t.numel() for part in parts for _, t in part.buffers)

    def _place(self, named, offset):
        for name, t in named:
            self.tensors.append((name, list(t.shape), offset, t.numel()))
            offset += t.numel()
        return offset


def _flatten(model, with_buffers, one_dtype=None):
    """The model's parameters, then (with_buffers) its buffers of the
    parameters' dtypes (not counters such as BatchNorm's num_batches_tracked),
    moved into one flat tensor per dtype, each a view of it. Returns the
    _Layout. one_dtype: the name of a caller that takes one dtype only, which
    refuses a model mixing them before anything moves."""
    named = list(model.named_parameters())
    if not named:
        raise ValueError("the model has no parameters")
    device = named[0][1].device
    parts = {}
    for name, p in named:
        if p.dtype not in _DTYPES:
            raise TypeError(f"parameter '{name}' is {p.dtype}; longhaul carries float32, bfloat16 or float16 "
                            "parameters")
        if p.device != device:
            raise TypeError(f"parameter '{name}' is on {p.device} and '{named[0][0]}' on {device}; "
                            "longhaul carries the parameters on one device")
        if one_dtype and p.dtype != named[0][1].dtype:
            raise TypeError(f"parameter '{name}' is {p.dtype} and '{named[0][0]}' {named[0][1].dtype}; "
                            f"{one_dtype} gives one tensor of one dtype (DiLoCo carries a model that mixes "
                            "dtypes, one flat tensor per dtype)")
        parts.setdefault(p.dtype, _Part(p.dtype)).params.append((name, p))
    for name, b in model.named_buffers() if with_buffers else []:
        if b.dtype not in parts:
            continue  # counters (BatchNorm's num_batches_tracked), other dtypes: not averaged
        if b.device != device:
            raise TypeError(f"buffer '{name}' is on {b.device} and the parameters on {device}; "
                            "longhaul carries them on one device")
        parts[b.dtype].buffers.append((name, b))
    with torch.no_grad():
        for part in parts.values():
            members = part.params + part.buffers
            part.flat = torch.empty(sum(t.numel() for _, t in members), dtype=part.dtype, device=device)
            offset = 0
            for _, t in members:
                n = t.numel()
                view = part.flat[offset:offset + n]
                view.copy_(t.detach().reshape(-1))
                t.data = view.view(t.shape)  # the same Parameter or buffer object, its storage in the flat tensor
                offset += n
    return _Layout(list(parts.values()))


def _adam_state(group):
    return ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if group.get("amsgrad") else [])


# (beta1, momentum_decay) -> NAdam's mu_product after 0, 1, 2, ... steps (float32
# values), extended as jobs go further: a rollback or commit looks one up.
_NADAM_PRODUCTS = {}


def _nadam_scalars(group, step):
    """NAdam's running product of its momentum coefficients after `step` steps,
    computed as torch.optim.NAdam computes it (float32, one factor per step)."""
    beta1, decay = group["betas"][0], group["momentum_decay"]
    products = _NADAM_PRODUCTS.setdefault((beta1, decay), [1.0])
    if len(products) <= step and len(products) > 1 and products[-1] == products[-2]:
        # A fixed point (0, or float32's least subnormal), reached within a few
        # thousand steps: the factors only grow towards beta1 < 1, so it stays.
        return {"mu_product": torch.tensor(products[-1], dtype=torch.float32)}
    if len(products) <= step:
        product = torch.tensor(products[-1], dtype=torch.float32)
        for s in range(len(products), step + 1):
            product *= beta1 * (1.0 - 0.5 * (0.96 ** (float(s) * decay)))
            products.append(product.item())
            if products[-1] == products[-2]:
                break
    return {"mu_product": torch.tensor(products[min(step, len(products) - 1)], dtype=torch.float32)}


class _Carried:
    """How longhaul carries one torch.optim optimizer's state.

    tensors(group): the per-parameter state tensors (each of the parameter's
    shape) the group's settings use, with torch.optim's names; step: how the
    optimizer keeps its step counter ("tensor", "int", or None: it has none);
    scalars(group, step): other per-parameter state that follows from the step
    counter alone, recomputed with it; adam_moments: its first two state tensors
    are Adam's first and second moments, which a job's moment sync averages
    (inner.first_moment_sync_rounds, inner.second_moment_sync_rounds)."""

    def __init__(self, tensors, step, scalars=None, adam_moments=False):
        self.tensors, self.step, self.scalars, self.adam_moments = tensors, step, scalars, adam_moments


# The optimizers whose state longhaul carries (exact types: a subclass may keep
# more). Every state tensor a parameter's first step would create starts at zero.
_CARRIED = {
    torch.optim.Adam: _Carried(_adam_state, "tensor", adam_moments=True),
    torch.optim.AdamW: _Carried(_adam_state, "tensor", adam_moments=True),
    torch.optim.Adamax: _Carried(lambda g: ["exp_avg", "exp_inf"], "tensor"),
    torch.optim.NAdam: _Carried(lambda g: ["exp_avg", "exp_avg_sq"], "tensor", _nadam_scalars, adam_moments=True),
    torch.optim.RAdam: _Carried(lambda g: ["exp_avg", "exp_avg_sq"], "tensor", adam_moments=True),
    torch.optim.Adagrad: _Carried(lambda g: ["sum"], "tensor"),  # created by its constructor: kept
    torch.optim.Adadelta: _Carried(lambda g: ["square_avg", "acc_delta"], "int"),
    torch.optim.RMSprop: _Carried(lambda g: ["square_avg"] + (["momentum_buffer"] if g["momentum"] > 0 else [])
                                  + (["grad_avg"] if g["centered"] else []), "int"),
    torch.optim.SGD: _Carried(lambda g: ["momentum_buffer"] if g["momentum"] != 0 else [], None),
}


def _carried(optimizer):
    kind = type(optimizer)
    if kind not in _CARRIED:
        names = ", ".join(sorted(k.__name__ for k in _CARRIED))
        raise TypeError(f"longhaul carries the state of torch.optim {names}, not {kind.__name__}; "
                        "pass optimizer=None to keep its state to the script")
    return _CARRIED[kind]


def bind_optimizer_state(optimizer, tensors, params, numel):
    """Makes the optimizer's per-parameter state views of flat tensors of
    `numel` values in the parameters' dtype (as torch.optim keeps them), one
    flat tensor per state name, parameter p's at p's offset in the model's flat
    tensor (`tensors`, `params`: flatten order). _CARRIED lists the optimizers
    (Adam, AdamW, Adamax, NAdam, RAdam, Adagrad, Adadelta, RMSprop, SGD).
    Values the optimizer already holds are kept; a parameter it has not
    stepped yet gets the zeros its first step would start from. Returns the
    flat tensors."""
    where = {id(p): (0, offset, n, shape) for p, (_, shape, offset, n) in zip(params, tensors)}
    device = params[0].device if params else torch.device("cpu")
    dtype = params[0].dtype if params else torch.float32
    return _bind_state(optimizer, where, [(numel, dtype, device)])[0]


def _bind_state(optimizer, where, flats):
    """bind_optimizer_state over several flat tensors: `where` maps id(parameter)
    to (flat index, offset, numel, shape), `flats` lists (numel, dtype, device)
    of each. Returns, per flat tensor, its state's flat tensors (one per state
    name, in the same order for every one)."""
    carried = _carried(optimizer)
    names = []
    for group in optimizer.param_groups:
        names += [n for n in carried.tensors(group) if n not in names]
    state_flats = [[torch.zeros(numel, dtype=dtype, device=device) for _ in names] for numel, dtype, device in flats]
    with torch.no_grad():
        for group in optimizer.param_groups:
            if (type(optimizer) is torch.optim.SGD and group["momentum"] != 0 and group["dampening"] != 0
                    and any("momentum_buffer" not in optimizer.state[p] for p in group["params"])):
                raise ValueError("SGD with dampening starts its momentum buffer from the first gradient undamped, "
                                 "which a carried buffer cannot do: use dampening=0, step once before DiLoCo, "
                                 "or pass optimizer=None")
            for p in group["params"]:
                if id(p) not in where:
                    raise ValueError("the optimizer holds a tensor that is not a parameter of the model")
                index, offset, n, shape = where[id(p)]
                state = optimizer.state[p]
                fresh = len(state) == 0
                step = state.get("step", 0)
                if carried.step == "tensor":
                    # Fused and capturable Adam keep their step counter with the parameter.
                    on_param = group.get("fused") or group.get("capturable")
                    state["step"] = torch.tensor(float(step), device=p.device if on_param else "cpu")
                elif carried.step == "int":
                    state["step"] = int(step)
                if carried.scalars and fresh:
                    state.update(carried.scalars(group, 0))
                for name, flat in zip(names, state_flats[index]):
                    view = flat[offset:offset + n].view(shape)
                    if state.get(name) is not None:  # SGD without momentum keeps None
                        view.copy_(state[name])
                    state[name] = view
    return state_flats


def _bind_parts(optimizer, parts):
    """_bind_state over the flat tensors of a _Layout's parts: per part, its
    state's flat tensors (none without an optimizer)."""
    if optimizer is None:
        return [[] for _ in parts]
    where = {id(p): (i, offset, p.numel(), list(p.shape))
             for i, part in enumerate(parts) for p, offset in part.param_offsets()}
    return _bind_state(optimizer, where, [(part.flat.numel(), part.dtype, part.flat.device) for part in parts])


def check_moment_sync(config, optimizer):
    """Refuses an optimizer whose state a job's moment sync would misread: that
    averages the first two state tensors as Adam's first and second moments."""
    inner = config.inner
    if optimizer is None or not (inner.first_moment_sync_rounds or inner.second_moment_sync_rounds):
        return
    if not _carried(optimizer).adam_moments:
        raise errors.InvalidArgument(
            f"the job averages the inner optimizer's moments across regions (inner.first_moment_sync_rounds "
            f"{inner.first_moment_sync_rounds}, inner.second_moment_sync_rounds {inner.second_moment_sync_rounds}), "
            f"which needs Adam's first and second moments: {type(optimizer).__name__} keeps none (use Adam, AdamW, "
            "NAdam or RAdam, or set both to 0)")


_MOVED = ("the model's parameters or buffers no longer live in longhaul's flat buffer (was the model moved with .to() "
          "or .share_memory(), a parameter's .data replaced or a state_dict loaded with assign?)")


def _spans(tensors):
    return [(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in tensors]


def aliasing_problem(flats, flat_ptr, aliased, optimizer, state_flats):
    """Why the tensors longhaul reads and writes in place are no longer the
    model's or the optimizer's, or None: the (first) flat tensor moved from
    flat_ptr (the address the library holds; None: the library holds a host
    copy's), a non-empty tensor of `aliased` lies in none of `flats`, or the
    optimizer's state is no longer a view of `state_flats` (replaced by
    load_state_dict, say)."""
    spans = _spans(flats)
    if (flat_ptr is not None and flats[0].data_ptr() != flat_ptr) or any(
            t.numel() > 0 and not any(a <= t.data_ptr() < b for a, b in spans) for t in aliased):
        return _MOVED
    if optimizer is None or not state_flats:
        return None
    spans = _spans(state_flats)
    carried = _carried(optimizer)
    for group in optimizer.param_groups:
        for p in group["params"]:
            for name in carried.tensors(group):
                value = optimizer.state[p].get(name)
                if value is not None and value.numel() > 0 and not any(a <= value.data_ptr() < b for a, b in spans):
                    return ("the optimizer's state no longer lives in longhaul's flat tensors (was "
                            "optimizer.load_state_dict() called, or a parameter group added, after DiLoCo? "
                            "do both before it; DiLoCo.load_state_dict() loads the outer state)")
    return None


def follow_step(optimizer, step):
    """Sets the optimizer's step counter (and what follows from it, _Carried.scalars)
    to `step`, as after a rollback or a rejoin to a job at that step."""
    carried = _carried(optimizer)
    for group in optimizer.param_groups:
        scalars = carried.scalars(group, step) if carried.scalars else {}
        for p in group["params"]:
            state = optimizer.state[p]
            if isinstance(state.get("step"), torch.Tensor):
                state["step"].fill_(float(step))
            elif "step" in state:
                state["step"] = int(step)
            for name, value in scalars.items():
                state[name].copy_(value)


class _HostCopy:
    """The worker library's view of a model's flat tensors when they are on a
    GPU, in a dtype other than float32, or several (one per dtype): one float32
    host array laid out as _Layout says, one per optimizer state name laid out
    the same way, and the copies the library asks for around the sync points
    (longhaul/worker/region_replica.h, ParameterMirror). Copies to the host are
    exact; copies back round to each flat tensor's dtype (to nearest even).

    pieces: per flat tensor, (flat, [(offset in flat, offset in the host array,
    count)]) covering it; states: per flat tensor, its optimizer state's flat
    tensors (one per state name, laid out as it)."""

    def __init__(self, pieces, states):
        self.pieces, self.states = pieces, states
        pin = pieces[0][0].is_cuda
        numel = sum(flat.numel() for flat, _ in pieces)
        self.host = torch.empty(numel, dtype=torch.float32, pin_memory=pin)
        self.host_state = [torch.empty(numel, dtype=torch.float32, pin_memory=pin) for _ in states[0]]
        self.to_host()
        self.state_to_host()

    def _settle(self):
        """Work the script queued on any stream of the device (an optimizer on a
        side stream, say) is done before the copies read or write its tensors."""
        if self.pieces[0][0].is_cuda:
            torch.cuda.synchronize(self.pieces[0][0].device)

    def _ranges(self, flats, host):
        """(range of a flat tensor, its range of `host`) for every segment."""
        for flat, (_, segments) in zip(flats, self.pieces):
            for at, host_at, n in segments:
                if n > 0:
                    yield flat[at:at + n], host[host_at:host_at + n]

    def _state(self, name):
        return [state[name] for state in self.states]

    def to_host(self):
        self._settle()
        for flat, host in self._ranges([flat for flat, _ in self.pieces], self.host):
            host.copy_(flat)

    def to_device(self):
        self._settle()
        for flat, host in self._ranges([flat for flat, _ in self.pieces], self.host):
            flat.copy_(host)

    def state_to_host(self):
        self._settle()
        for name, host_state in enumerate(self.host_state):
            for flat, host in self._ranges(self._state(name), host_state):
                host.copy_(flat)

    def state_to_device(self):
        self._settle()
        for name, host_state in enumerate(self.host_state):
            for flat, host in self._ranges(self._state(name), host_state):
                flat.copy_(host)


class DiLoCo:
    """This worker's part of the job's outer synchronisation (DiLoCo, Streaming
    DiLoCo, the fully synchronous baseline or local-only: the job spec decides).

    eval_fn: optional callable returning the validation loss (a float); it runs on
    the region's first worker right after each outer step, with the model holding
    the new parameters, and is reported to `longhaul status` and the metrics.
    """

    def __init__(self, model, eval_fn=None, optimizer=None, _host_copy=None):
        """_host_copy (tests): go through a host copy even for float32 CPU
        parameters, as for parameters on a GPU or in another dtype (those
        always do)."""
        self._model = model
        layout = _flatten(model, with_buffers=True)
        parts = layout.parts
        self._flats = [part.flat for part in parts]
        self._tensors, self._params, self._numel = layout.tensors, layout.params, layout.numel
        # A parameter and (if any) a buffer of each flat tensor: moving the model breaks the aliasing of all.
        self._aliased = []
        for part in parts:
            for members in (part.params, part.buffers):
                self._aliased += [t for _, t in members if t.numel() > 0][:1]
        self._optimizer = optimizer
        state_parts = _bind_parts(optimizer, parts)
        self._optimizer_state = [t for state in state_parts for t in state]
        first = self._flats[0]
        _host_copy = bool(_host_copy) or len(parts) > 1 or first.device.type != "cpu" or first.dtype != torch.float32
        self._host_copy = _HostCopy([(part.flat, part.segments()) for part in parts],
                                    state_parts) if _host_copy else None
        self._session = _native.Session()
        self.config = from_json(self._session.config_json)
        check_moment_sync(self.config, optimizer)
        # The address the library reads and writes (None: it works on the host copy's).
        self._flat_ptr = first.data_ptr() if self._host_copy is None else None
        if self._host_copy is None:  # one float32 flat tensor on the CPU, laid out as the library's array
            self._session.start(first.data_ptr(), first.numel(), self._tensors, layout.buffer_floats,
                                [t.data_ptr() for t in self._optimizer_state], eval_fn)
        else:
            h = self._host_copy
            self._session.start(h.host.data_ptr(), h.host.numel(), self._tensors, layout.buffer_floats,
                                [t.data_ptr() for t in h.host_state], eval_fn, h)
        self.resynced = self._session.resynced_at_start
        self.last_event = RESYNCED if self.resynced else NONE
        self._follow_job_step()

    def step(self, loss=0.0, tokens=0):
        """Call once after every inner optimizer step. Returns the event (see module doc)."""
        if isinstance(loss, torch.Tensor):
            loss = float(loss.detach())
        self._check_in_place()
        return self._after(self._session.step(float(loss), int(tokens)))

    def _after(self, event):
        if event != NONE:
            self.last_event = event
            if event == RESYNCED:
                self.resynced = True
            self._check_aliasing()
            self._follow_job_step()
        return event

    def _follow_job_step(self):
        """The optimizer's step counter (bias correction) is the job step: after a
        rollback or a rejoin the restored state goes with it."""
        if self._optimizer is not None:
            follow_step(self._optimizer, self.job_step)

    def sync_gradients(self):
        """Call on every inner step between loss.backward() (and any gradient
        averaging inside the region, as with DDP) and opt.step().

        With `sync.kind: sync` (synchronous data parallelism) it replaces every
        parameter's .grad with the mean over every worker of every region, so
        every region takes the same optimizer step from the same state: one
        process with the combined batch, to fp32 rounding (a bfloat16 or float16
        model's gradients hold the mean rounded to their dtype). For every other kind
        it does nothing, so a script stays one field of the job spec away from
        every policy. Returns False when the exchange failed: the round then
        rolls back at the next step() (the optimizer step may still run).
        """
        if not self._session.syncs_gradients:
            return True
        params = self._params
        flat = torch.empty(self._numel, dtype=torch.float32)  # buffers' entries: zeroed by the session
        for p, (_, _, offset, n) in zip(params, self._tensors):
            if p.grad is None:
                flat[offset:offset + n].zero_()  # an unused parameter: a zero gradient here
            else:
                flat[offset:offset + n].copy_(p.grad.detach().reshape(-1))
        ok = self._session.sync_gradients(flat.data_ptr(), flat.numel())
        with torch.no_grad():
            for p, (_, shape, offset, n) in zip(params, self._tensors):
                mean = flat[offset:offset + n].view(shape)
                if p.grad is None:
                    p.grad = mean.to(device=p.device, dtype=p.dtype, copy=True)
                else:
                    p.grad.copy_(mean)
        return ok

    def fail_round(self, why):
        """The inner step failed in a way the job should see (not a crash): the round
        is reported failed and rolled back. Returns the next event."""
        self._check_in_place()
        return self._after(self._session.fail_round(str(why)))

    def _check_in_place(self):
        """Before the library touches the flat tensor: it must still be where the
        library holds it (model.share_memory() moves it; one comparison per step)."""
        if self._flat_ptr is not None and self._flats[0].data_ptr() != self._flat_ptr:
            raise errors.FailedPrecondition(_MOVED)

    def _check_aliasing(self):
        problem = aliasing_problem(self._flats, self._flat_ptr, self._aliased, self._optimizer, self._optimizer_state)
        if problem is not None:
            raise errors.FailedPrecondition(problem)

    @property
    def finished(self):
        return self._session.finished

    @property
    def round(self):
        """The round in progress (1-based)."""
        return self._session.round

    @property
    def committed_round(self):
        return self._session.committed_round

    @property
    def job_step(self):
        """Inner steps of the job done so far (jumps after a rejoin): drive lr schedules with it."""
        return self._session.job_step

    @property
    def flat_parameters(self):
        """The flat tensor every parameter (then every carried buffer) is a view
        of; a model that mixes dtypes has one per dtype (flat_tensors)."""
        if len(self._flats) > 1:
            raise errors.FailedPrecondition(
                f"the model mixes dtypes ({', '.join(str(f.dtype) for f in self._flats)}): its parameters are views "
                "of one flat tensor per dtype, diloco.flat_tensors")
        return self._flats[0]

    @property
    def flat_tensors(self):
        """The flat tensors the parameters and carried buffers are views of, one
        per dtype, in the order their dtypes first appear in the model."""
        return list(self._flats)

    @property
    def tensors(self):
        return list(self._tensors)

    def state_dict(self):
        """The outer state: global parameters theta, this worker's outer-optimizer
        state, and the last committed round."""
        theta = torch.frombuffer(bytearray(self._session.theta()), dtype=torch.float32)
        outer = self._session.outer_state()
        outer_t = torch.frombuffer(bytearray(outer), dtype=torch.float32) if outer else torch.empty(0)
        return {"round": self.committed_round, "theta": theta, "outer_state": outer_t,
                "tensors": self.tensors}

    def load_state_dict(self, state):
        """Loads a state_dict() before a round's first inner step. Every region must
        load the same state (the next commit checks that replicas agree)."""
        # Host memory for the worker library, wherever the state was loaded to.
        theta = state["theta"].detach().to("cpu", torch.float32).contiguous()
        outer = state["outer_state"].detach().to("cpu", torch.float32).contiguous()
        self._session.load_state(theta.data_ptr(), theta.numel(), outer.data_ptr(), outer.numel())

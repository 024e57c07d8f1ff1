"""A small byte-level transformer language model in plain PyTorch.

Nothing here knows about longhaul: `CharLM` is an ordinary nn.Module, `TextData`
reads a text file and hands out batches, `evaluate` measures held-out loss.
`train.py` turns a loop over these into a longhaul worker.

Run this file directly for a quick self-check of the data split:

    python3 examples/pytorch/charlm.py [TEXT_FILE]
"""

from __future__ import annotations

import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 256  # bytes


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention, written out (torch 1.13 has no
    F.scaled_dot_product_attention)."""

    def __init__(self, d_model: int, heads: int, context: int):
        super().__init__()
        if d_model % heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by heads ({heads})")
        self.heads = heads
        self.head_dim = d_model // heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        # Additive mask: 0 on and below the diagonal, -inf above (future positions).
        bias = torch.full((context, context), float("-inf")).triu(1)
        self.register_buffer("mask_bias", bias, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h, hd = self.heads, self.head_dim
        # [B, T, 3D] -> [3, B*heads, T, head_dim] in one copy
        qkv = self.qkv(x).view(b, t, 3, h, hd).permute(2, 0, 3, 1, 4).reshape(3, b * h, t, hd)
        q, k, v = qkv[0], qkv[1], qkv[2]
        # scores = mask + q k^T / sqrt(head_dim), fused in one baddbmm
        att = torch.baddbmm(self.mask_bias[:t, :t], q, k.transpose(1, 2),
                            alpha=1.0 / math.sqrt(hd))
        att = F.softmax(att, dim=-1)
        y = torch.bmm(att, v)                                    # [B*heads, T, head_dim]
        y = y.view(b, h, t, hd).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, d_model: int, heads: int, context: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads, context)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model),
            nn.GELU(),
            nn.Linear(4 * d_model, d_model),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class CharLM(nn.Module):
    """Decoder-only transformer over bytes: token + learned position embedding,
    `layers` pre-LayerNorm blocks (causal self-attention, GELU MLP), final
    LayerNorm, linear head to 256 logits."""

    def __init__(self, context: int = 64, d_model: int = 96, layers: int = 2, heads: int = 4):
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, context) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, VOCAB)
        self.apply(self._init)
        # GPT-2: scale the residual projections down with depth.
        for name, p in self.named_parameters():
            if name.endswith("attn.proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * layers))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """idx: LongTensor [B, T] with T <= context. Returns logits [B, T, 256]."""
        t = idx.shape[1]
        if t > self.context:
            raise ValueError(f"sequence length {t} exceeds the model's context {self.context}")
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy in nats per byte, computed in float32 whatever the
        model's dtype (a bfloat16 loss would be rounded to steps of ~0.01)."""
        logits = self(x)
        return F.cross_entropy(logits.reshape(-1, VOCAB).float(), y.reshape(-1))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


class TextData:
    """A text file as bytes: the last `validation_fraction` is held out for
    validation (the same bytes in every region); the rest is cut into
    region_count * world_size contiguous slices and this worker trains on slice
    region_index * world_size + rank.

    Region ranges are cut first and worker slices inside them (the same split the
    built-in trainer uses), so a region's data does not depend on how the other
    regions are laid out.
    """

    def __init__(self, path: str, context: int, validation_fraction: float = 0.05,
                 region_index: int = 0, region_count: int = 1, rank: int = 0,
                 world_size: int = 1):
        if not 0.0 < validation_fraction < 1.0:
            raise ValueError(f"validation_fraction must be in (0, 1), got {validation_fraction}")
        if not 0 <= region_index < region_count:
            raise ValueError(f"region_index {region_index} not in [0, {region_count})")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} not in [0, {world_size})")
        with open(path, "rb") as f:
            raw = f.read()
        self.path = path
        self.context = context
        data = torch.frombuffer(bytearray(raw), dtype=torch.uint8).long() if raw else \
            torch.empty(0, dtype=torch.long)
        size = data.numel()
        val = int(size * validation_fraction)
        train = size - val
        self.slice_index = region_index * world_size + rank
        self.slice_count = region_count * world_size
        r_lo = train * region_index // region_count
        r_hi = train * (region_index + 1) // region_count
        lo = r_lo + (r_hi - r_lo) * rank // world_size
        hi = r_lo + (r_hi - r_lo) * (rank + 1) // world_size
        need = context + 1
        if hi - lo < need or val < need:
            raise ValueError(
                f"text file '{path}' ({size} bytes) is too small: this worker's training slice "
                f"has {hi - lo} bytes and the validation tail {val} bytes; each needs at least "
                f"context + 1 = {need} (use a bigger file, fewer regions/workers or a smaller "
                f"--context)")
        self.train_range = (lo, hi)  # byte offsets into the file, [lo, hi)
        self.val_range = (train, size)
        self._train = data[lo:hi]
        self._val = data[train:size]
        self._window = torch.arange(need)

    def _windows(self, source: torch.Tensor, starts: torch.Tensor):
        chunk = source[starts.unsqueeze(1) + self._window]  # [B, context + 1]
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()

    def batch(self, batch_size: int, generator: torch.Generator):
        """(x, y) LongTensors [batch_size, context]: random windows from this
        worker's slice; y is x shifted by one byte."""
        return self._windows(self._train, self._starts(batch_size, generator))

    def starts_at(self, batch_size: int, seed: int, step: int) -> torch.Tensor:
        """The window starts of job step `step`: a function of (seed, this slice,
        step) alone, so a relaunched worker that resumes at step k draws what
        step k draws, never the batches its region already trained on, and a
        retried round draws its batches again."""
        key = ((seed * 1_000_003 + self.slice_index) * 1_000_000_007 + step) % (1 << 63)
        return self._starts(batch_size, torch.Generator().manual_seed(key))

    def batch_at(self, starts: torch.Tensor):
        """(x, y) for window starts from starts_at()."""
        return self._windows(self._train, starts)

    def _starts(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        high = self._train.numel() - self.context  # exclusive: start + context < len
        return torch.randint(0, high, (batch_size,), generator=generator)

    def val_batches(self, n: int, batch_size: int):
        """n fixed (x, y) batches spread evenly over the validation tail; the same
        in every region and on every call."""
        last = self._val.numel() - self.context - 1
        count = n * batch_size
        starts = torch.linspace(0, last, count).round().long() if count > 1 else \
            torch.zeros(count, dtype=torch.long)
        return [self._windows(self._val, s) for s in starts.split(batch_size)]


def evaluate(model: CharLM, data: TextData, batches: int, batch_size: int = 16) -> float:
    """Mean cross-entropy (nats/byte) over `batches` fixed validation batches."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            losses = [model.loss(x, y).item() for x, y in data.val_batches(batches, batch_size)]
    finally:
        model.train(was_training)
    return sum(losses) / len(losses)


def _self_check(path: str) -> None:
    context = 64
    sizes = [(1, 1), (3, 1), (3, 2), (2, 4)]
    for region_count, world_size in sizes:
        ranges = []
        for r in range(region_count):
            for k in range(world_size):
                d = TextData(path, context, 0.05, r, region_count, k, world_size)
                assert d.slice_index == r * world_size + k
                ranges.append(d.train_range)
                # every training window lies inside this worker's slice
                g = torch.Generator().manual_seed(d.slice_index)
                x, y = d.batch(32, g)
                assert x.shape == y.shape == (32, context) and x.dtype == torch.long
                assert torch.equal(x[:, 1:], y[:, :-1])
                # validation: deterministic and identical for every (region, rank)
                v = d.val_batches(3, 8)
                if r == 0 and k == 0:
                    ref = v
                assert len(v) == 3 and all(vx.shape == (8, context) for vx, _ in v)
                assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
                           for a, b in zip(v, ref))
                assert all(torch.equal(a[0], b[0]) for a, b in zip(v, d.val_batches(3, 8)))
                assert d.train_range[1] <= d.val_range[0]
        ranges.sort()
        assert ranges[0][0] == 0
        for (lo0, hi0), (lo1, hi1) in zip(ranges, ranges[1:]):
            assert hi0 == lo1, f"slices not contiguous/disjoint: {ranges}"
        print(f"ok: {region_count} regions x {world_size} workers -> "
              f"{len(ranges)} disjoint slices covering [0, {ranges[-1][1]})")
    # same seed -> same batches; different seeds -> different batches
    d = TextData(path, context, 0.05, 0, 3, 0, 1)
    a = d.batch(16, torch.Generator().manual_seed(7))[0]
    b = d.batch(16, torch.Generator().manual_seed(7))[0]
    c = d.batch(16, torch.Generator().manual_seed(8))[0]
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(1)
    p1 = torch.nn.utils.parameters_to_vector(CharLM().parameters())
    torch.manual_seed(1)
    p2 = torch.nn.utils.parameters_to_vector(CharLM().parameters())
    assert torch.equal(p1, p2)
    print(f"ok: seeded batches reproducible; identical init from one seed "
          f"({p1.numel()} parameters)")


if __name__ == "__main__":
    _self_check(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/common-licenses/GPL-3")

"""Small blocks written out by hand, in the styles programs use, for ``opscope optimize``'s
tests: functions, modules with helper methods, lambdas in ``nn.Sequential``.  Tensors are
small; each ``*_inputs`` function returns the input tuple."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

D = 16


def rms_function(x, weight, eps=1e-6):
    ms = (x * x).mean(-1, keepdim=True)
    rms = torch.rsqrt(ms + eps)
    return x * rms * weight


def rms_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(4, D, generator=g), 1 + 0.1 * torch.randn(D, generator=g))


class LlamaRMSNorm(nn.Module):
    def __init__(self, dim: int = D, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        out = self._norm(x.float()).type_as(x)
        return out * self.weight


def x_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(2, 3, D, generator=g),)


class NoWeightRMS(nn.Module):
    def forward(self, x):
        return x / torch.sqrt((x**2).mean(dim=-1, keepdim=True) + 1e-6)


class ColumnNorm(nn.Module):
    """A norm over dim 0: the built-in (last dims only) must not be used."""

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + 1e-6)


class HandLayerNorm(nn.Module):
    def __init__(self, dim: int = D):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt(var + 1e-5)
        return y * self.weight + self.bias


def attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def attention_inputs():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, 2, 8, D, generator=g) for _ in range(3))


def masked_attention(q, k, v, mask):
    scores = torch.matmul(q, k.transpose(-1, -2)) * 0.25 + mask
    return F.softmax(scores, dim=-1) @ v


def masked_inputs():
    q, k, v = attention_inputs()
    mask = torch.triu(torch.full((8, 8), -1e9), 1)
    return (q, k, v, mask)


def wide_mask_inputs():
    """A mask that makes the scores larger when added: SDPA cannot take it."""
    q, k, v = attention_inputs()
    mask = torch.zeros(3, 2, 2, 8, 8)
    return (q, k, v, mask)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def swish_mlp():
    """Lambdas in an ``nn.Sequential``: matmul + bias and x * sigmoid(x)."""
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(D, D) * 0.1)
    b = nn.Parameter(torch.zeros(D))
    seq = nn.Sequential(Lambda(lambda x: x @ w.t() + b), Lambda(lambda x: x * torch.sigmoid(x)))
    seq.w, seq.b = w, b
    return seq


class Block(nn.Module):
    """RMSNorm, a linear with bias written out, GELU (tanh) and SiLU gating, all together."""

    def __init__(self, dim: int = D):
        super().__init__()
        torch.manual_seed(0)
        self.norm_w = nn.Parameter(torch.ones(dim))
        self.w = nn.Parameter(torch.randn(dim, dim) * 0.1)
        self.b = nn.Parameter(torch.zeros(dim))

    def norm(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.norm_w

    def forward(self, x):
        h = self.norm(x)
        h = torch.matmul(h, self.w) + self.b
        g = 0.5 * h * (1 + torch.tanh(0.7978845608028654 * (h + 0.044715 * torch.pow(h, 3))))
        return g * torch.sigmoid(g)


class Branchy(nn.Module):
    """Data-dependent control flow: symbolic tracing fails; torch.compile still handles it."""

    def forward(self, x):
        if x.sum() > 0:
            return x * torch.sigmoid(x)
        return x

"""Blocks written the way public model code writes them, for ``opscope optimize``'s tests:
nanoGPT's causal self-attention and MLP, Hugging Face's LlamaRMSNorm and a TF-style LayerNorm
that reassigns its input, GPT-2's tanh GELU, a block whose RMSNorm helper is called with two
weights - and the traps that look like a pattern but compute something else (an unbiased
variance, the epsilon outside the square root, an attention with an additive bias).

Shapes are small.  Each ``*_inputs`` returns the input tuple; ``CONFIG`` builds the modules
that take constructor arguments (``--init-args``).  This file is copied and patched by the
tests: keep it self-contained.
"""

import math

import torch
import torch.nn as nn
from torch.nn import functional as F

N_EMBD = 32
N_HEAD = 4
BLOCK_SIZE = 16


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention (model.py), with the manual path taken."""

    def __init__(self, n_embd=N_EMBD, n_head=N_HEAD, block_size=BLOCK_SIZE, dropout=0.0):
        super().__init__()
        assert n_embd % n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        # output projection
        self.c_proj = nn.Linear(n_embd, n_embd)
        # regularization
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head = n_head
        self.n_embd = n_embd
        self.dropout = dropout
        self.flash = False
        # causal mask to ensure that attention is only applied to the left in the input sequence
        self.register_buffer(
            "bias",
            torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size),
        )

    def forward(self, x):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)

        # query, key, values for all heads in batch, the head moved forward as a batch dim
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)

        # causal self-attention: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        if self.flash:
            # efficient attention using Flash Attention CUDA kernels
            y = torch.nn.functional.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=None,
                dropout_p=self.dropout if self.training else 0,
                is_causal=True,
            )
        else:
            # manual implementation of attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs

        # output projection
        y = self.resid_dropout(self.c_proj(y))
        return y


def new_gelu(x):
    """
    Implementation of the GELU activation function currently in Google BERT repo
    (identical to OpenAI GPT). Reference: Gaussian Error Linear Units (GELU) paper:
    https://arxiv.org/abs/1606.08415
    """
    return (
        0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    )


class MLP(nn.Module):
    """GPT-2's MLP (nanoGPT, before nn.GELU)."""

    def __init__(self, n_embd=N_EMBD, dropout=0.0):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.c_fc(x)
        x = new_gelu(x)
        x = self.c_proj(x)
        x = self.dropout(x)
        return x


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size=N_EMBD, eps=1e-6):
        """
        LlamaRMSNorm is equivalent to T5LayerNorm
        """
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class TFStyleLayerNorm(nn.Module):
    """A LayerNorm in the TF style (epsilon inside the square root), reassigning its input."""

    def __init__(self, hidden_size=N_EMBD, eps=1e-12):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.variance_epsilon)
        return self.weight * x + self.bias


class Block(nn.Module):
    """A pre-norm transformer block: one RMSNorm helper called with two weights, nanoGPT's
    attention and GPT-2's MLP."""

    def __init__(self, n_embd=N_EMBD, n_head=N_HEAD):
        super().__init__()
        self.norm1_weight = nn.Parameter(torch.ones(n_embd))
        self.norm2_weight = nn.Parameter(torch.ones(n_embd))
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.mlp = MLP(n_embd)

    def norm(self, x, weight, eps=1e-6):
        # root mean square over the features
        ms = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(ms + eps) * weight

    def forward(self, x):
        x = x + self.attn(self.norm(x, self.norm1_weight))
        x = x + self.mlp(self.norm(x, self.norm2_weight))
        return x


def make_block():
    """A factory, as training scripts build their model."""
    torch.manual_seed(0)
    return Block(N_EMBD, N_HEAD)


def block_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(2, 8, N_EMBD, generator=g),)


def wide_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(64, 512, generator=g),)


# -- traps: these look like a pattern and compute something else ---------------------------


class UnbiasedLayerNorm(nn.Module):
    """torch.var is unbiased by default: not F.layer_norm."""

    def __init__(self, hidden_size=N_EMBD):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-5) * self.weight + self.bias


class EpsOutsideLayerNorm(nn.Module):
    """The epsilon added to the square root, not under it."""

    def __init__(self, hidden_size=N_EMBD):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        x = (x - u) / (torch.sqrt(s) + 1e-5)
        return self.weight * x + self.bias


class EpsOutsideRMSNorm(nn.Module):
    def __init__(self, hidden_size=N_EMBD):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        return self.weight * (x / (torch.sqrt(x.pow(2).mean(-1, keepdim=True)) + 1e-6))


class BiasedAttention(nn.Module):
    """Attention with a learned additive bias on the scores (relative positions): the bias is
    SDPA's attn_mask, never dropped."""

    def __init__(self, n_head=N_HEAD, t=8):
        super().__init__()
        self.rel_bias = nn.Parameter(torch.zeros(n_head, t, t))

    def forward(self, q, k, v):
        att = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
        att = att + self.rel_bias
        att = torch.softmax(att, dim=-1)
        return att @ v


def gpt2_attn(query, key, value, causal_mask):
    """Hugging Face GPT-2's eager attention: the mask through torch.where, not matched (a
    near-miss that says which op)."""
    attn_weights = torch.matmul(query, key.transpose(-1, -2))
    attn_weights = attn_weights / torch.full(
        [], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device
    )
    mask_value = torch.finfo(attn_weights.dtype).min
    attn_weights = torch.where(causal_mask, attn_weights, mask_value)
    attn_weights = nn.functional.softmax(attn_weights, dim=-1)
    return torch.matmul(attn_weights, value)


def gpt2_inputs():
    q, k, v = qkv_inputs()
    return (q, k, v, torch.ones(8, 8, dtype=torch.bool).tril())


def qkv_inputs():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, N_HEAD, 8, 8, generator=g) for _ in range(3))

"""Decoder transformer and LSTM baseline, in TransformerLens names: what the model computes.

One `Transformer` class covers both papers:

* Zhong & Andreas (2024) (docs/papers.md, random transformers: model): GPT-2 style,
  pre-LayerNorm, learned positions, GELU (tanh), MLP 4*d, causal, untied unembedding without
  bias, N(0, 0.02^2) init.
* Syrkis & Sogaard (2024), "miiii" (docs/papers.md, miiii: model and task): no LayerNorm, no biases,
  ReLU, non-causal, He init, one unembedding per prime with the logits beyond q masked.  Set via
  :func:`miiii_config`.

Shapes use b = batch, t = positions, d = d_model, h = n_heads, k = d_head, m = d_mlp, v = vocab.

``Transformer.forward`` is the plain forward: embed, blocks, final LayerNorm, unembed
(``last_only``: the last position alone, the same arithmetic restricted to it).  Attention is
softmax(q k^T / sqrt(d_head)) applied to the values; a multi-task model's logits are one einsum
per head, masked beyond each head's classes.  Its activations pass through hook points named as in
TransformerLens (``hook_embed``, ``blocks.0.attn.hook_pattern``, ``blocks.0.mlp.hook_post``,
``blocks.0.hook_resid_post``, ...) and shaped as there (``hook_q/k/v/z`` [b, t, h, k],
``hook_pattern`` [b, h, tq, t]): :meth:`Hooked.run_with_cache` reads them,
:meth:`Hooked.run_with_hooks` reads or replaces them (ablation, patching).

Speed sits beside it, never inside: :mod:`rt_lib.model.fast_paths` computes the same logits by
regrouped arithmetic (attention kernels chosen by length, the multi-task unembedding over the
existing classes only, last-position shortcuts), equal up to float rounding and tested against
this forward.  The training loop calls it by name; this module does not import it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rt_lib.primes import primes_below

Trainable = Literal["all", "embeddings", "unembed", "embed", "token_unembed"]
LSTMTrainable = Literal["all", "embeddings"]
LSTMInit = Literal["pytorch", "small"]
# Which shortcut fast_paths.last_logits may take for Transformer(cfg, last_position=...).
LastPosition = Literal["shared", "vocab", "full"]

#: Which parameter names each ``trainable`` setting leaves trainable (Zhong & Andreas, Table 2).
TRAINABLE_PARAMS: dict[str, frozenset[str] | None] = {
    "all": None,  # None = every parameter
    "embeddings": frozenset({"W_E", "W_pos", "W_U"}),  # the "random transformer" (section 3)
    "unembed": frozenset({"W_U"}),  # Table 2: unembedding only
    "embed": frozenset({"W_E", "W_pos"}),  # Table 2: token + position embeddings only
    "token_unembed": frozenset({"W_E", "W_U"}),  # Table 2: W_pos frozen (random or sinusoidal)
}


def _check_choice(name: str, value: object, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not one of {list(allowed)}")


@dataclass(frozen=True)
class TransformerConfig:
    d_vocab: int  # input tokens; every task states its own vocabulary
    n_ctx: int  # longest input; learned positions need a fixed table
    d_model: int = 128  # residual width: the paper's main knob (16 vs 1024 in Table 1)
    # n_layers: 2 for the synthetic tasks (docs/papers.md, random transformers: model), 1 for miiii
    # (docs/papers.md, miiii: model and task)
    n_layers: int = 2
    n_heads: int = 4  # 4 for the synthetic tasks and the miiii best run
    d_mlp: int | None = None  # None -> 4 * d_model, as in GPT-2 and the miiii FFN
    d_vocab_out: int | None = None  # output classes; None -> d_vocab (a shared LM vocabulary)
    out_sizes: tuple[int, ...] | None = None  # miiii: one unembedding per task with q classes each
    act: Literal["gelu_tanh", "relu"] = "gelu_tanh"  # GPT-2 uses tanh-GELU; miiii uses ReLU
    layernorm: bool = True  # pre-LN in GPT-2; miiii drops it for interpretability
    bias: bool = True  # GPT-2 has biases (frozen at 0 in random models); miiii has none
    causal: bool = True  # decoder LM; miiii reads the whole input, so non-causal
    # "gpt2": N(0, 0.02^2) with scaled out-projections (docs/papers.md, random transformers: model);
    # "he": He normal, fan-in = the input axis; "he_jax": jax's he_normal, which the miiii code
    # uses for every weight (docs/papers.md, miiii: the authors' code beyond the text):
    # a normal truncated at 2 std and rescaled to std sqrt(2 / fan-in), fan-in = the product of
    # all axes but the last (h * d for W_Q/W_K/W_V, n_tasks * d for a multi-task W_U)
    init: Literal["gpt2", "he", "he_jax"] = "gpt2"
    init_std: float = 0.02  # GPT-2's initializer_range (docs/papers.md, random transformers: model)
    pos_embed: Literal["learned", "sinusoidal"] = "learned"  # sinusoidal = frozen (Table 2 ablation)
    # The sinusoids' amplitude: 1 in the authors' code (weight_frozen == 101, beside token
    # embeddings of std init_std); None: the token embeddings' scale, each entry of RMS init_std
    pos_scale: float | None = 1.0
    dropout: float = 0.0  # 0 for the synthetic tasks; miiii uses 0.1
    # Where dropout acts: "gpt2" = embeddings, attention pattern and each sublayer's output before
    # its residual add (HF GPT-2, TinyStories); "residual" = the residual stream after each add,
    # nothing else (the miiii code's block_fn: z = dropout(z + attn(z)), same for the MLP).
    dropout_at: Literal["gpt2", "residual"] = "gpt2"
    # "sample": a mask per example (nn.Dropout); "batch": one mask per step shared by the whole
    # batch, as the miiii code draws it (its forward is vmapped with the dropout key unmapped)
    dropout_mask: Literal["sample", "batch"] = "sample"
    trainable: Trainable = "all"  # which parameters train; "embeddings" is the random transformer

    def __post_init__(self) -> None:
        for name in ("d_vocab", "n_ctx", "d_model", "n_layers", "n_heads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}"
            )
        _check_choice("trainable", self.trainable, get_args(Trainable))
        _check_choice("act", self.act, ("gelu_tanh", "relu"))
        _check_choice("init", self.init, ("gpt2", "he", "he_jax"))
        _check_choice("pos_embed", self.pos_embed, ("learned", "sinusoidal"))
        if self.pos_scale is not None and not self.pos_scale > 0:
            raise ValueError(f"pos_scale must be a positive number or None, got {self.pos_scale!r}")
        _check_choice("dropout_at", self.dropout_at, ("gpt2", "residual"))
        _check_choice("dropout_mask", self.dropout_mask, ("sample", "batch"))
        if self.dropout_mask == "batch" and self.dropout_at != "residual":
            raise ValueError("dropout_mask='batch' is the miiii code's residual dropout: it needs "
                             f"dropout_at='residual', got {self.dropout_at!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.out_sizes is not None and (
            not self.out_sizes or min(self.out_sizes) < 1
        ):
            raise ValueError(f"out_sizes must be non-empty positive sizes, got {self.out_sizes}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def mlp_width(self) -> int:
        return self.d_mlp if self.d_mlp is not None else 4 * self.d_model

    @property
    def n_out(self) -> int:
        """Width of one unembedding (the largest q for multi-task heads)."""
        if self.out_sizes is not None:
            return max(self.out_sizes)
        return self.d_vocab_out if self.d_vocab_out is not None else self.d_vocab


def miiii_config(p: int, d_model: int = 256, n_heads: int = 4, dropout: float = 0.1,
                 out_sizes: tuple[int, ...] | None = None, **overrides) -> TransformerConfig:
    """The miiii model of Syrkis & Sogaard (docs/papers.md, miiii: model and task) as a
    configuration of the same Transformer.

    Input [x1, x0, "="] over a vocabulary of p digits plus "="; one block; no LN, no biases, ReLU,
    non-causal attention.  By default as the miiii code builds it (``miiii/model.py`` at ab76fe1):
    jax's ``he_normal`` for every weight (``init="he_jax"``) and one dropout mask per step for the
    whole batch on the residual stream (``dropout_mask="batch"``).  Notebook 11's CPU profile
    overrides init, mask and placement with the recipe that groks in its budget (MiiiiParams says
    why).  ``out_sizes`` defaults to every prime q < p.
    """
    sizes = out_sizes if out_sizes is not None else tuple(primes_below(p))
    fields = dict(d_vocab=p + 1, n_ctx=3, d_model=d_model, n_layers=1, n_heads=n_heads,
                  out_sizes=sizes, act="relu", layernorm=False, bias=False, causal=False,
                  init="he_jax", dropout=dropout, dropout_at="residual", dropout_mask="batch")
    fields.update(overrides)
    return TransformerConfig(**fields)


def sinusoidal_positions(n_ctx: int, d_model: int) -> Tensor:
    """Vaswani et al. (2017) sin/cos table [t, d]; the frozen positions of the Table 2 ablation."""
    pos = torch.arange(n_ctx, dtype=torch.float32)[:, None]
    i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = pos / (10000.0 ** (i / d_model))
    table = torch.zeros(n_ctx, d_model)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table


def mask_future(scores: Tensor) -> Tensor:
    """Causal mask on attention scores [..., t, t]: query i sees keys 0..i only."""
    t = scores.shape[-1]
    keep = torch.ones(t, t, dtype=torch.bool, device=scores.device).tril()
    return scores.masked_fill(~keep, float("-inf"))


def attention_pattern(q: Tensor, key: Tensor, causal: bool) -> Tensor:
    """softmax(q key^T / sqrt(k)) per head (Vaswani et al. 2017): q [b, h, tq, k], key
    [b, h, t, k] -> pattern [b, h, tq, t], each query's weights over the keys."""
    scores = q @ key.transpose(-1, -2) / math.sqrt(q.shape[-1])  # [b, h, tq, t]
    scores = mask_future(scores) if causal else scores
    return scores.softmax(-1)


def attend(q: Tensor, key: Tensor, value: Tensor, causal: bool, p_drop: float,
           training: bool) -> Tensor:
    """The pattern applied to the values: z [b, h, tq, k], value [b, h, t, k].  Dropout (rate
    ``p_drop``, in training) acts on the pattern."""
    return F.dropout(attention_pattern(q, key, causal), p_drop, training) @ value


class HookPoint(nn.Module):
    """The identity on one activation, named by its place in the model (``name``, set by
    :class:`Hooked`): a forward hook registered on it reads the activation, and replaces it when
    it returns a tensor (TransformerLens's HookPoint).  A hook is called as ``fn(activation,
    hook)``, ``hook`` being this point."""

    def __init__(self) -> None:
        super().__init__()
        self.name = ""

    def forward(self, x: Tensor) -> Tensor:
        return x

    def active(self) -> bool:
        """Whether a hook is registered here."""
        return bool(self._forward_hooks or self._forward_pre_hooks)


HookFn = Callable[[Tensor, HookPoint], Tensor | None]


def _at_hook(point: HookPoint, heads_first: Tensor) -> Tensor:
    """``point`` applied to a [b, h, t, k] activation in TransformerLens's layout [b, t, h, k],
    the result back in [b, h, t, k]: two transposed views, so without a hook the values, their
    strides and every result's bits are the arithmetic's own."""
    return point(heads_first.transpose(1, 2)).transpose(1, 2)


class Hooked(nn.Module):
    """What a model with hook points offers (TransformerLens's HookedRootModule, in little)."""

    def name_hook_points(self) -> None:
        for name, module in self.named_modules():
            if isinstance(module, HookPoint):
                module.name = name

    def hook_points(self) -> dict[str, HookPoint]:
        return {n: m for n, m in self.named_modules() if isinstance(m, HookPoint)}

    @contextmanager
    def hooks(self, fwd_hooks: Iterable[tuple[str, HookFn]]) -> Iterator[Hooked]:
        """The hooks ``[(hook point name, fn), ...]`` registered inside the block, removed after
        it (even on error).  An unknown name raises, naming the hook points there are."""
        points = self.hook_points()
        with ExitStack() as stack:
            for name, fn in fwd_hooks:
                if name not in points:
                    raise KeyError(f"no hook point {name!r}; there are: {', '.join(points)}")
                handle = points[name].register_forward_hook(
                    lambda module, args, out, fn=fn: fn(out, module))
                stack.callback(handle.remove)
            yield self

    def run_with_hooks(self, tokens: Tensor, fwd_hooks: Iterable[tuple[str, HookFn]],
                       last_only: bool = False) -> Tensor:
        """``self(tokens, last_only)`` with the hooks registered for this call only."""
        with self.hooks(fwd_hooks):
            return self(tokens, last_only=last_only)

    def run_with_cache(self, tokens: Tensor, names: Iterable[str] | None = None,
                       last_only: bool = False) -> tuple[Tensor, dict[str, Tensor]]:
        """``self(tokens, last_only)`` and the activations (detached) at the named hook points,
        every one by default: (logits, {hook point name: activation})."""
        cache: dict[str, Tensor] = {}

        def keep(x: Tensor, hook: HookPoint) -> None:
            cache[hook.name] = x.detach()

        wanted = list(self.hook_points()) if names is None else list(names)
        logits = self.run_with_hooks(tokens, [(name, keep) for name in wanted], last_only)
        return logits, cache


class LayerNorm(nn.Module):
    def __init__(self, d_model: int, enabled: bool):
        super().__init__()
        self.enabled = enabled
        if enabled:
            self.w = nn.Parameter(torch.ones(d_model))
            self.b = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: Tensor) -> Tensor:
        if not self.enabled:
            return x
        return F.layer_norm(x, (x.shape[-1],), self.w, self.b, eps=1e-5)


class Attention(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        h, d, k = cfg.n_heads, cfg.d_model, cfg.d_head
        self.cfg = cfg
        self.p_drop = cfg.dropout if cfg.dropout_at == "gpt2" else 0.0  # GPT-2: on the pattern
        # TransformerLens's shapes at the hook points: q, k, v and z are [batch, pos, head_index,
        # d_head] there (so TransformerLens-style code, ``z[:, :, head]``, reads a head), while
        # the arithmetic below keeps the heads first, [b, h, t, k] (see _at_hook)
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()  # [b, t, h, k]
        self.hook_pattern = HookPoint()  # [b, h, tq, t]: query attends to key
        self.hook_z = HookPoint()  # [b, tq, h, k]: each head's output before W_O
        self.W_Q = nn.Parameter(torch.empty(h, d, k))
        self.W_K = nn.Parameter(torch.empty(h, d, k))
        self.W_V = nn.Parameter(torch.empty(h, d, k))
        # Per-head output maps summed over heads: "heads combined by addition" (miiii, after
        # Nanda et al.), which is exactly concatenation followed by one d x d projection.
        self.W_O = nn.Parameter(torch.empty(h, k, d))
        if cfg.bias:
            self.b_Q = nn.Parameter(torch.zeros(h, k))
            self.b_K = nn.Parameter(torch.zeros(h, k))
            self.b_V = nn.Parameter(torch.zeros(h, k))
            self.b_O = nn.Parameter(torch.zeros(d))

    def _project(self, x: Tensor, W: Tensor, b: Tensor | None) -> Tensor:
        # x [b, t, d] @ W [h, d, k] -> [b, h, t, k] as one matmul over the fused heads.
        h, d, k = W.shape
        out = (x @ W.permute(1, 0, 2).reshape(d, h * k)).view(*x.shape[:-1], h, k)
        if b is not None:
            out = out + b
        return out.transpose(-2, -3)

    def queries(self, x: Tensor) -> Tensor:
        """Q [b, h, t, k] of an (already LayerNormed) residual stream x [b, t, d]."""
        return self._project(x, self.W_Q, self.b_Q if self.cfg.bias else None)

    def keys_values(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """K and V [b, h, t, k] of an (already LayerNormed) residual stream x [b, t, d]."""
        bias = self.cfg.bias
        return (self._project(x, self.W_K, self.b_K if bias else None),
                self._project(x, self.W_V, self.b_V if bias else None))

    def forward(self, x: Tensor, last_only: bool = False) -> Tensor:
        """x [b, t, d] -> [b, t, d], or [b, 1, d] for the last query alone when ``last_only``."""
        q = _at_hook(self.hook_q, self.queries(x[:, -1:] if last_only else x))  # [b, h, tq, k]
        key, value = self.keys_values(x)  # [b, h, t, k]
        return self.mix(q, _at_hook(self.hook_k, key), _at_hook(self.hook_v, value))

    def mix(self, q: Tensor, key: Tensor, value: Tensor) -> Tensor:
        """Each query's mix of the values, summed over heads through W_O: q [b, h, tq, k], key
        and value [b, h, t, k] -> [b, tq, d]."""
        pattern = self.hook_pattern(attention_pattern(q, key, self.masks(q)))  # [b, h, tq, t]
        z = F.dropout(pattern, self.p_drop, self.training) @ value  # [b, h, tq, k]
        return self.out(_at_hook(self.hook_z, z))

    def masks(self, q: Tensor) -> bool:
        """Whether queries q [b, h, tq, k] attend under the causal mask: the last query sees
        every key, so the mask only matters for several queries."""
        return self.cfg.causal and q.shape[2] > 1

    def out(self, z: Tensor) -> Tensor:
        """The heads' outputs z [b, h, tq, k] summed through W_O: [b, tq, d]."""
        b_, h, tq, k = z.shape
        out = z.transpose(1, 2).reshape(b_, tq, h * k) @ self.W_O.reshape(h * k, -1)
        return out + self.b_O if self.cfg.bias else out


class MLP(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        self.W_in = nn.Parameter(torch.empty(cfg.d_model, cfg.mlp_width))
        self.W_out = nn.Parameter(torch.empty(cfg.mlp_width, cfg.d_model))
        if cfg.bias:
            self.b_in = nn.Parameter(torch.zeros(cfg.mlp_width))
            self.b_out = nn.Parameter(torch.zeros(cfg.d_model))
        self.hook_pre = HookPoint()  # [b, t, m]: before the nonlinearity
        self.hook_post = HookPoint()  # [b, t, m]: the neurons' activations

    def forward(self, x: Tensor) -> Tensor:
        pre = x @ self.W_in  # [b, t, m]
        if self.cfg.bias:
            pre = pre + self.b_in
        pre = self.hook_pre(pre)
        post = F.gelu(pre, approximate="tanh") if self.cfg.act == "gelu_tanh" else F.relu(pre)
        post = self.hook_post(post)
        out = post @ self.W_out
        return out + self.b_out if self.cfg.bias else out


class BatchDropout(nn.Module):
    """Dropout with one mask [1, ...] for the whole batch (the miiii code's draw:
    docs/papers.md, miiii: the authors' code beyond the text)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0:
            return x
        keep = torch.rand(1, *x.shape[1:], device=x.device) >= self.p
        return x * keep / (1 - self.p)


# jax.random.truncated_normal(-2, 2) has std 0.8796...; jax's variance_scaling divides by it
TRUNCATED_STD = 0.87962566103423978


@torch.no_grad()
def init_parameter(leaf: str, param: Tensor, cfg: TransformerConfig) -> None:
    """Initialise one parameter (``leaf``: its name in its module) as ``cfg.init`` says."""
    if leaf.startswith("b_") or leaf == "b":
        param.zero_()
    elif leaf == "w":
        param.fill_(1.0)
    elif cfg.init == "gpt2":
        std = cfg.init_std
        if leaf in ("W_O", "W_out"):
            # GPT-2 scales residual-stream writers by 1/sqrt(2 n_layers)
            # (docs/papers.md, random transformers: model).
            std = cfg.init_std / math.sqrt(2 * cfg.n_layers)
        param.normal_(0.0, std)
    elif cfg.init == "he":
        # He et al. (2015) normal, fan-in = axis -2 (the input axis of every map here); W_O
        # reads all heads at once, so its fan-in is d_model.
        fan_in = cfg.d_model if leaf == "W_O" else param.shape[-2]
        param.normal_(0.0, math.sqrt(2.0 / fan_in))
    else:  # "he_jax": jax.nn.initializers.he_normal (in_axis=-2, out_axis=-1)
        fan_in = math.prod(param.shape[:-1])
        std = math.sqrt(2.0 / fan_in) / TRUNCATED_STD
        nn.init.trunc_normal_(param, 0.0, std, -2 * std, 2 * std)


class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.ln1 = LayerNorm(cfg.d_model, cfg.layernorm)
        self.attn = Attention(cfg)
        self.ln2 = LayerNorm(cfg.d_model, cfg.layernorm)
        self.mlp = MLP(cfg)
        self.dropout = BatchDropout(cfg.dropout) if cfg.dropout_mask == "batch" else nn.Dropout(cfg.dropout)
        self.on_residual = cfg.dropout_at == "residual"
        self.hook_resid_pre = HookPoint()  # [b, t, d]: the stream coming in
        self.hook_attn_out = HookPoint()  # [b, tq, d]: what attention writes
        self.hook_resid_mid = HookPoint()  # [b, tq, d]: after attention's write
        self.hook_mlp_out = HookPoint()  # [b, tq, d]: what the MLP writes
        self.hook_resid_post = HookPoint()  # [b, tq, d]: the stream going out

    def forward(self, x: Tensor, last_only: bool = False) -> Tensor:
        """x [b, t, d] -> [b, t, d], or [b, 1, d] at the last position alone (``last_only``)."""
        x = self.hook_resid_pre(x)
        # sliced before attention reads x, as always: autograd sums the gradients reaching x in
        # the order their operations were recorded, so this order is part of every result's bits
        resid = x[:, -1:] if last_only else x
        return self.write(resid, self.attn(self.ln1(x), last_only))

    def write(self, resid: Tensor, attn_out: Tensor) -> Tensor:
        """The residual stream ``resid`` [b, tq, d] after attention's output ``attn_out`` and
        then the MLP's are added to it, with dropout where the config puts it."""
        attn_out = self.hook_attn_out(attn_out)
        if self.on_residual:  # miiii code: dropout(z + f(z))
            resid = self.hook_resid_mid(self.dropout(resid + attn_out))
            mlp_out = self.hook_mlp_out(self.mlp(self.ln2(resid)))
            return self.hook_resid_post(self.dropout(resid + mlp_out))
        resid = self.hook_resid_mid(resid + self.dropout(attn_out))  # GPT-2: z + dropout(f(z))
        mlp_out = self.hook_mlp_out(self.mlp(self.ln2(resid)))
        return self.hook_resid_post(resid + self.dropout(mlp_out))


class Transformer(Hooked):
    """tokens [b, t] -> logits [b, t, v]; [b, v] with ``last_only``; [b, (t,) n_tasks, q] multi-task.

    ``forward`` is the plain forward.  Two options are stored for :mod:`rt_lib.model.fast_paths`
    and never read by ``forward``: ``last_position``, which last-position shortcut
    ``fast_paths.last_logits`` may take ("shared": each distinct prefix once, or for one block
    (position, token) key/value tables; "vocab": every one-token prefix of the vocabulary, a
    data-independent shape that vmap needs, for rt_lib/training/batched.py; "full": none), and
    ``fused_attention``, whether its attention kernel beyond a few keys is SDPA (False: plain
    matmuls, for vmap).
    """

    def __init__(self, cfg: TransformerConfig, last_position: LastPosition = "shared",
                 fused_attention: bool = True):
        super().__init__()
        _check_choice("last_position", last_position, get_args(LastPosition))
        self.cfg = cfg
        self.last_position = last_position  # read by fast_paths.last_logits, not by forward
        self.fused_attention = fused_attention  # read by fast_paths' attention, not by forward
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model))  # [v, d]
        if cfg.pos_embed == "learned":
            self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model))  # [t, d]
        else:
            table = sinusoidal_positions(cfg.n_ctx, cfg.d_model)
            if cfg.pos_scale != 1.0:  # sin and cos have RMS 1/sqrt(2)
                table = table * (cfg.pos_scale if cfg.pos_scale is not None
                                 else cfg.init_std * math.sqrt(2))
            self.register_buffer("W_pos", table)
        self.hook_embed = HookPoint()  # [b, t, d]: W_E[tokens]
        self.hook_pos_embed = HookPoint()  # [t, d]: W_pos[:t]
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_final = LayerNorm(cfg.d_model, cfg.layernorm)
        n_tasks = len(cfg.out_sizes) if cfg.out_sizes is not None else None
        shape = (cfg.d_model, cfg.n_out) if n_tasks is None else (n_tasks, cfg.d_model, cfg.n_out)
        self.W_U = nn.Parameter(torch.empty(*shape))  # [d, v] or [n_tasks, d, q_max]
        if cfg.out_sizes is not None:
            # Class c of task i exists only if c < q_i; the rest are masked to -inf.
            valid = torch.arange(cfg.n_out)[None, :] < torch.tensor(cfg.out_sizes)[:, None]
            self.register_buffer("out_mask", valid, persistent=False)
            # Flat indices (into n_tasks * q_max) of the classes that exist, for fast_paths.unembed,
            # which computes only these (p = 113: 1,480 of 29 * 109 = 3,161), kept here because a
            # buffer moves with the model (device, vmap's stacked state) and costs no sync per step.
            self.register_buffer("out_columns", valid.flatten().nonzero().squeeze(1),
                                 persistent=False)
        self.embed_dropout = nn.Dropout(cfg.dropout if cfg.dropout_at == "gpt2" else 0.0)
        self.reset_parameters()
        apply_trainable(self, cfg.trainable)
        self.name_hook_points()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        for name, param in self.named_parameters():
            init_parameter(name.rsplit(".", 1)[-1], param, self.cfg)

    def embed(self, tokens: Tensor) -> Tensor:
        t = tokens.shape[1]
        if t > self.cfg.n_ctx:
            raise ValueError(f"sequence length {t} exceeds n_ctx={self.cfg.n_ctx}")
        return self.embed_dropout(self.hook_embed(self.W_E[tokens])
                                  + self.hook_pos_embed(self.W_pos[:t]))

    def forward(self, tokens: Tensor, last_only: bool = False) -> Tensor:
        """Logits at every position, or at the last alone with ``last_only``."""
        x = self.embed(tokens)  # [b, t, d]
        for i, block in enumerate(self.blocks):
            final = i == len(self.blocks) - 1
            # Only the last position of the last block feeds a last-position loss.
            x = block(x, last_only and final)
        x = self.ln_final(x)
        if last_only:
            x = x[:, -1]  # [b, d]
        return self.unembed(x)

    def unembed(self, x: Tensor) -> Tensor:
        """x [..., d] -> logits [..., v], or [..., n_tasks, q_max] with one unembedding per task,
        the classes beyond each task's q at -inf."""
        if self.cfg.out_sizes is None:
            return x @ self.W_U
        logits = torch.einsum("...d,ndq->...nq", x, self.W_U)  # [..., n_tasks, q_max]
        return logits.masked_fill(~self.out_mask, float("-inf"))


@dataclass(frozen=True)
class LSTMConfig:
    d_vocab: int  # input tokens
    d_model: int = 128  # embedding and hidden width, matched to the transformer it is compared to
    n_layers: int = 2  # the paper's LSTM baseline: 2 layers (docs/papers.md, random transformers: model)
    d_vocab_out: int | None = None  # output classes; None -> d_vocab
    trainable: LSTMTrainable = "all"  # "embeddings": only embedding and readout train
    n_ctx: int | None = None  # unused (no positions); kept so tasks can size any model alike
    # "pytorch": the authors' baseline (experiment_stream.py: nn.Embedding, default nn.LSTM and
    # nn.Linear), i.e. W_E ~ N(0, 1), W_U and b_U ~ U(+-1/sqrt(d)).  "small": W_E ~ N(0, 0.02^2),
    # W_U ~ N(0, 1/d), b_U = 0 (this companion's earlier choice, kept to compare).
    init: LSTMInit = "pytorch"

    def __post_init__(self) -> None:
        for name in ("d_vocab", "d_model", "n_layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        _check_choice("trainable", self.trainable, get_args(LSTMTrainable))
        _check_choice("init", self.init, get_args(LSTMInit))

    @property
    def n_out(self) -> int:
        return self.d_vocab_out if self.d_vocab_out is not None else self.d_vocab


class LSTM(Hooked):
    """Baseline of Zhong & Andreas: embedding -> LSTM(d, d, 2 layers) -> linear readout."""

    def __init__(self, cfg: LSTMConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        if cfg.init == "pytorch":  # what nn.Embedding and nn.Linear(d, n_out) draw by default
            W_E = torch.randn(cfg.d_vocab, d)
            bound = 1 / math.sqrt(d)
            W_U = torch.empty(d, cfg.n_out).uniform_(-bound, bound)
            b_U = torch.empty(cfg.n_out).uniform_(-bound, bound)
        else:
            W_E = torch.randn(cfg.d_vocab, d) * 0.02
            W_U = torch.randn(d, cfg.n_out) / math.sqrt(d)
            b_U = torch.zeros(cfg.n_out)
        self.W_E = nn.Parameter(W_E)  # [d_vocab, d_model]
        self.lstm = nn.LSTM(d, d, num_layers=cfg.n_layers, batch_first=True)  # PyTorch's init
        self.W_U = nn.Parameter(W_U)  # [d_model, n_out]
        self.b_U = nn.Parameter(b_U)  # [n_out]
        if cfg.trainable == "embeddings":
            self.lstm.requires_grad_(False)
        self.hook_lstm_out = HookPoint()  # [b, t, d]: the last layer's hidden states
        self.name_hook_points()

    def forward(self, tokens: Tensor, last_only: bool = False) -> Tensor:
        h = self.hook_lstm_out(self.lstm(self.W_E[tokens])[0])  # [b, t, d]
        if last_only:
            h = h[:, -1]
        return h @ self.W_U + self.b_U


ModelConfig = TransformerConfig | LSTMConfig


def apply_trainable(model: nn.Module, trainable: str) -> None:
    """Freeze every parameter outside the named set (``TRAINABLE_PARAMS[trainable]``)."""
    names = TRAINABLE_PARAMS[trainable]
    for name, param in model.named_parameters():
        param.requires_grad_(names is None or name in names)


def build_model(cfg: ModelConfig, seed: int, **options) -> nn.Module:
    """Initialise a model from ``seed`` alone, leaving the global RNG untouched.

    ``options`` go to the constructor: ``last_position`` and ``fused_attention`` of
    :class:`Transformer` (the LSTM has none)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if isinstance(cfg, TransformerConfig):
            return Transformer(cfg, **options)
        if isinstance(cfg, LSTMConfig):
            return LSTM(cfg, **options)
    raise TypeError(f"unknown model config {type(cfg).__name__}")


def count_params(model: nn.Module, trainable_only: bool = True) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """``model.eval()`` inside the block; its training flag as it was afterwards (even on error)."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)

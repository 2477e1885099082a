"""A lean forward for small Llama-family drafters on CPU: transformers' logits without its per-call overhead.

A drafter proposes one token per forward, so its cost per token is what a round pays ``k`` times. For a small
drafter on a CPU that cost is mostly not arithmetic: the 1.1M-parameter drafter of the embedded pair spends
about 1 ms in transformers' forward (mask building, cache objects, module dispatch) for 0.4 ms of tensor work.
:class:`LeanRunner` is a :class:`~hsd.runner.Runner` that computes the same function with a handful of tensor
operations per layer, on the model's own parameters (read, never changed; for a drafter of at most ``FUSE_LIMIT``
parameters the q/k/v and gate/up matrices are also joined into a copy, and on the CPU its matrices are copies stored
column-major, the fastest layout for a drafter's small matrices, which stay in the caches: :mod:`hsd.layout`), with
its keys and values in one preallocated buffer per layer. The rotary tables come from the model's own
``rotary_emb`` module, so every position-only RoPE variant (default, linear, Llama 3, YaRN) is the model's.

Only the drafter takes this path. Losslessness never depends on how the drafter computes its distribution (the
algorithms accept and correct with whatever ``q`` the drafter reports, spec §1-§3); the target, whose logits *are*
the output, always runs through transformers. :func:`lean_unsupported` says why a model keeps transformers'
forward (another architecture, a GPU, a non-float32 model, ...); ``HSD_LEAN_DRAFTER=0`` turns the path off.
``tests/test_lean.py`` checks the logits against transformers' for every supported architecture, through
forwards, crops and batched paths, with sliding windows and grouped-query attention.
"""

from __future__ import annotations

import os
import time

import torch
import torch.nn.functional as F

from .layout import column_major, layout_setting
from .loading import Model
from .runner import Runner, Snapshot, inference

# The causal-LM classes whose forward is embed -> (RMSNorm, attention with RoPE, RMSNorm, SwiGLU) x L -> RMSNorm -> head.
ARCHITECTURES = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"}
ROPE_TYPES = {"default", "linear", "llama3", "yarn"}  # cos/sin depend on the position only
SHARED_PREFIX = 2048  # (paths - 1) x cached positions from which batched paths read the prefix once (_attend_paths)
# instead of a copy per path: below it the copy is cheaper than the extra matrix products (0.1 ms at 2 paths)
FUSE_LIMIT = 50_000_000  # parameters: up to this size a drafter's projections are joined (a copy), beyond it read


def lean_unsupported(model: Model) -> str | None:
    """Why ``model`` cannot run on :class:`LeanRunner` exactly, or ``None`` when it can."""
    if os.environ.get("HSD_LEAN_DRAFTER", "1") == "0":
        return "HSD_LEAN_DRAFTER=0"
    net = model.model
    name = type(net).__name__
    if name not in ARCHITECTURES:
        return f"{name} is not one of {sorted(ARCHITECTURES)}"
    if model.device.type != "cpu":
        return f"runs on {model.device.type} (the lean forward is for CPUs, where per-call overhead dominates)"
    if model.dtype != torch.float32:
        return f"weights in {model.dtype} (the lean forward is checked in float32)"
    if net.training:
        return "in training mode"
    cfg = net.config
    rope = getattr(cfg, "rope_parameters", None) or {}
    rope_type = rope.get("rope_type", "default") if isinstance(rope, dict) else "per-layer"
    if rope_type not in ROPE_TYPES:
        return f"RoPE type {rope_type!r} depends on the sequence length"
    if getattr(cfg, "hidden_act", "silu") != "silu" or getattr(cfg, "mlp_bias", False):
        return "an MLP other than bias-free SwiGLU"
    if getattr(cfg, "pretraining_tp", 1) != 1:
        return "pretraining_tp > 1"
    if net.lm_head.bias is not None:
        return "an LM head with a bias"
    types = set(_layer_types(cfg))
    if not types <= {"full_attention", "sliding_attention"}:
        return f"layer types {sorted(types)}"
    if "sliding_attention" in types and not getattr(cfg, "sliding_window", None):
        return "sliding layers without a window"
    return None


def _layer_types(cfg) -> list[str]:
    """Each layer's attention, as the model's mask builder reads it: ``layer_types`` where the config has them
    (Qwen2), else every layer sliding when there is a window (Mistral), else full attention (Llama)."""
    n = cfg.num_hidden_layers
    return list(getattr(cfg, "layer_types", None) or
                ["sliding_attention" if getattr(cfg, "sliding_window", None) else "full_attention"] * n)


class _Layer:
    """One decoder layer's weights and attention shape, read from the model's modules. A small model's q/k/v and
    gate/up projections are also joined into one matrix each (a copy of at most ``FUSE_LIMIT`` parameters in
    all): one matrix product instead of three, then two; on the CPU these and the other matrices are stored
    column-major (:mod:`hsd.layout`)."""

    def __init__(self, layer, window: int | None, fuse: bool, column: bool = False):
        attn, mlp = layer.self_attn, layer.mlp
        self.norm1, self.norm1_eps = layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon
        self.norm2, self.norm2_eps = layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon
        self.head_dim, self.scaling = attn.head_dim, attn.scaling
        self.heads = attn.q_proj.out_features // attn.head_dim
        self.kv_heads = attn.k_proj.out_features // attn.head_dim
        self.window = window
        qkv = (attn.q_proj, attn.k_proj, attn.v_proj)
        self.o = attn.o_proj.weight
        self.down = mlp.down_proj.weight
        if fuse:  # copies, stored column-major on the CPU (hsd/layout.py: faster for a small model's few rows)
            lay = column_major if column else (lambda w: w)
            self.qkv = [(lay(torch.cat([p.weight.detach() for p in qkv])),
                         None if qkv[0].bias is None else torch.cat([p.bias.detach() for p in qkv]))]
            self.gate_up = [lay(torch.cat((mlp.gate_proj.weight.detach(), mlp.up_proj.weight.detach())))]
            self.o, self.down = lay(self.o.detach()), lay(self.down.detach())
        else:
            self.qkv = [(p.weight, p.bias) for p in qkv]
            self.gate_up = [mlp.gate_proj.weight, mlp.up_proj.weight]
        self.intermediate = mlp.gate_proj.out_features

    def project_qkv(self, h: torch.Tensor) -> torch.Tensor:
        return torch.cat([F.linear(h, w, b) for w, b in self.qkv], -1) if len(self.qkv) > 1 else \
            F.linear(h, *self.qkv[0])

    def mlp(self, h: torch.Tensor) -> torch.Tensor:
        if len(self.gate_up) > 1:
            gate, up = (F.linear(h, w) for w in self.gate_up)
        else:
            gate, up = F.linear(h, self.gate_up[0]).split(self.intermediate, -1)
        return F.linear(F.silu(gate) * up, self.down)


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)  # x * rsqrt(mean(x^2) + eps) * weight, as LlamaRMSNorm


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


def _mask(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int | None) -> torch.Tensor:
    """``[m, n]``: query at ``q_pos[i]`` sees key at ``k_pos[j]`` (causal, and inside the window, as transformers'
    sliding mask: the query's own position and the ``window - 1`` before it)."""
    seen = k_pos[None, :] <= q_pos[:, None]
    if window is not None:
        seen &= k_pos[None, :] > q_pos[:, None] - window
    return seen


def _attend_paths(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, prefix_k: torch.Tensor, prefix_v: torch.Tensor,
                  q_pos: torch.Tensor, first: int, window: int | None, scale: float) -> torch.Tensor:
    """Attention of ``b`` paths (``q``: ``[b, heads, m, d]``; their own ``k``, ``v``: ``[b, kv_heads, m, d]``) over the
    cached prefix they share (``prefix_k``, ``prefix_v``: ``[kv_heads, P, d]``, positions ``first..``) and their own
    positions, ``[b, heads, m, d]``. The prefix is read once for every path, not copied per path: the queries of all
    paths of a head group are one matrix against it."""
    b, nq, m, d = q.shape
    nkv, n_prefix = prefix_k.shape[0], prefix_k.shape[1]
    g = nq // nkv
    by_head = q.view(b, nkv, g, m, d).permute(1, 0, 2, 3, 4).reshape(nkv, b * g * m, d)
    shared = torch.matmul(by_head, prefix_k.transpose(1, 2)).view(nkv, b, g, m, n_prefix).permute(1, 0, 2, 3, 4)
    own = torch.matmul(q.view(b, nkv, g, m, d), k.unsqueeze(2).transpose(-1, -2))  # [b, nkv, g, m, m]
    if m > 1:  # a path's later positions see its earlier ones, not the other way
        own = own.masked_fill(~_mask(q_pos, q_pos, window), float("-inf"))
    if window is not None and n_prefix:  # later positions may no longer see the prefix's first ones
        seen = _mask(q_pos, torch.arange(first, first + n_prefix), window)
        if not bool(seen.all()):
            shared = shared.masked_fill(~seen, float("-inf"))
    weights = torch.softmax(torch.cat((shared, own), -1) * scale, -1)
    w_shared = weights[..., :n_prefix].permute(1, 0, 2, 3, 4).reshape(nkv, b * g * m, n_prefix)
    out = torch.matmul(w_shared, prefix_v).view(nkv, b, g, m, d).permute(1, 0, 2, 3, 4)
    out = out + torch.matmul(weights[..., n_prefix:], v.unsqueeze(2))
    return out.reshape(b, nq, m, d)


class LeanRunner(Runner):
    """A :class:`~hsd.runner.Runner` with the same logits, for a model :func:`lean_unsupported` accepts.

    ``keys[l]`` and ``values[l]`` (``[1, kv_heads, capacity, head_dim]``) hold the cached positions ``0..len-1``;
    a crop only moves the length, and the buffers grow by doubling.
    """

    def __init__(self, model: Model):
        self.model = model
        self.ids: list[int] = []
        self.forwards = 0
        self.seconds = 0.0
        self._cuda = False
        self.device = model.device
        net = model.model
        cfg = net.config
        types = _layer_types(cfg)
        window = getattr(cfg, "sliding_window", None)
        fuse = sum(p.numel() for p in net.parameters()) <= FUSE_LIMIT
        column = self.device.type == "cpu" and layout_setting() != "row"
        self._layers = [_Layer(layer, window if kind == "sliding_attention" else None, fuse, column)
                        for layer, kind in zip(net.model.layers, types)]
        self._embed, self._head = net.model.embed_tokens.weight, net.lm_head.weight
        if fuse and column:
            self._head = column_major(self._head.detach())  # a copy when tied to the embedding (which reads rows)
        self._norm, self._norm_eps = net.model.norm.weight, net.model.norm.variance_epsilon
        self._rotary = net.model.rotary_emb
        self._limit = model.context_length
        self._cos = self._sin = torch.empty(0)
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self._reserve(256)

    def _reserve(self, n: int) -> None:
        """Room for ``n`` positions in the caches and the rotary tables (doubling, up to the context limit)."""
        have = self._cos.shape[0]
        if n <= have:
            return
        size = max(n, 2 * have)
        if self._limit:
            size = max(n, min(size, self._limit))
        probe = self._embed[:1].unsqueeze(0)
        cos, sin = self._rotary(probe, torch.arange(size, device=self.device).unsqueeze(0))
        self._cos, self._sin = cos[0], sin[0]
        used = len(self.ids)
        keys, values = [], []
        for i, layer in enumerate(self._layers):
            shape = (1, layer.kv_heads, size, layer.head_dim)
            k, v = torch.zeros(shape, dtype=self._embed.dtype), torch.zeros(shape, dtype=self._embed.dtype)
            if self.keys:
                k[:, :, :used] = self.keys[i][:, :, :used]
                v[:, :, :used] = self.values[i][:, :, :used]
            keys.append(k)
            values.append(v)
        self.keys, self.values = keys, values

    def _run(self, tokens: torch.Tensor, start: int, write: bool) -> torch.Tensor:
        """Hidden states after the last layer for ``tokens`` (``[b, m]``) at positions ``start..start+m-1`` on
        top of the cached positions ``0..start-1``. ``write``: store their keys and values (``b`` must be 1)."""
        b, m = tokens.shape
        end = start + m
        self._reserve(end)
        x = F.embedding(tokens, self._embed)
        cos, sin = self._cos[start:end, None, :], self._sin[start:end, None, :]  # [m, 1, d]: every head of a position
        q_pos = torch.arange(start, end)
        for i, layer in enumerate(self._layers):
            d, nq, nkv = layer.head_dim, layer.heads, layer.kv_heads
            h = _rms(x, layer.norm1, layer.norm1_eps)
            qkv = layer.project_qkv(h).view(b, m, nq + 2 * nkv, d)
            qk = _rotate(qkv[:, :, : nq + nkv], cos, sin)  # queries and keys rotated together
            q, k = qk[:, :, :nq].transpose(1, 2), qk[:, :, nq:].transpose(1, 2)
            v = qkv[:, :, nq + nkv:].transpose(1, 2)
            first = 0 if layer.window is None else max(0, start - layer.window + 1)
            if not write and (b - 1) * (start - first) >= SHARED_PREFIX:
                out = _attend_paths(q, k, v, self.keys[i][0, :, first:start], self.values[i][0, :, first:start],
                                    q_pos, first, layer.window, layer.scaling)
            else:
                if write:
                    self.keys[i][:, :, start:end] = k
                    self.values[i][:, :, start:end] = v
                    keys, values = self.keys[i][:, :, first:end], self.values[i][:, :, first:end]
                else:
                    keys = torch.cat((self.keys[i][:, :, first:start].expand(b, -1, -1, -1), k), 2)
                    values = torch.cat((self.values[i][:, :, first:start].expand(b, -1, -1, -1), v), 2)
                if nq != nkv:
                    keys, values = keys.repeat_interleave(nq // nkv, 1), values.repeat_interleave(nq // nkv, 1)
                mask = None if m == 1 else _mask(q_pos, torch.arange(first, end), layer.window)
                out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=layer.scaling)
            x = x + F.linear(out.transpose(1, 2).reshape(b, m, nq * d), layer.o)
            x = x + layer.mlp(_rms(x, layer.norm2, layer.norm2_eps))
        return x

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(_rms(hidden, self._norm, self._norm_eps), self._head)[..., : self.model.n_logits]

    @inference
    def forward(self, ids: list[int], keep: int = 1) -> torch.Tensor:
        """Append ``ids`` to the cache; return the logits of the last ``keep`` positions, ``[keep, V]``."""
        started = time.perf_counter()
        hidden = self._run(torch.tensor([ids], dtype=torch.long), len(self.ids), write=True)
        logits = self._logits(hidden[0, -keep:])
        self.ids.extend(ids)
        self.forwards += 1
        self.seconds += time.perf_counter() - started
        return logits

    def snapshot(self) -> Snapshot:
        """The tokens cached now. The buffers are overwritten in place, so :meth:`forward_paths` uses them only
        while the runner still holds these tokens first, and otherwise computes whole sequences."""
        return Snapshot(tuple(self.ids), None)

    @inference
    def forward_paths(self, snap: Snapshot, paths: list[tuple[int, ...]]) -> torch.Tensor:
        """Logits after each of ``paths`` (one length) fed on top of ``snap``, ``[len(paths), V]``, in one batched
        forward that does not touch the runner's cache. Counted as one forward."""
        started = time.perf_counter()
        n = len(snap.ids)
        if tuple(self.ids[:n]) == snap.ids:
            hidden = self._run(torch.tensor(paths, dtype=torch.long), n, write=False)
        else:  # the buffers no longer hold the snapshot: whole sequences, without the cache
            hidden = self._run(torch.tensor([list(snap.ids) + list(p) for p in paths], dtype=torch.long), 0, write=False)
        logits = self._logits(hidden[:, -1])
        self.forwards += 1
        self.seconds += time.perf_counter() - started
        return logits

    def crop(self, n: int) -> None:
        """Keep the first ``n`` cached positions (their keys and values stay where they are)."""
        del self.ids[n:]


def drafter_runner(model: Model) -> Runner:
    """The runner a drafter drafts with: :class:`LeanRunner` when it computes the model exactly, else
    transformers' forward through :class:`~hsd.runner.Runner`."""
    return Runner(model) if lean_unsupported(model) else LeanRunner(model)

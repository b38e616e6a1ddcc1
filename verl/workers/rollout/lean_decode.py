"""`LeanDecoder`: the one-token decode step of a Llama-family causal LM, written directly against its weights.

Sampling 64 tokens for 128 rows with a small model is not bound by its matrix products but by the per-step overhead
of the generic Hugging Face forward: mask construction, cache bookkeeping, hooks and ~15 small kernels per layer,
for a step whose matrix products take a few milliseconds (the benchmark workload: 23 ms per step of which the
matmuls were about half, ``benchmarks/RESULTS.md`` section 2). This step does the same arithmetic with fewer, larger
kernels -- it is what an inference engine does on a GPU:

* one matmul for q, k and v, and one for gate and up (the projections' weights concatenated once per generation,
  from the live parameters, so a policy update is seen by the next ``generate_sequences``);
* rotary embeddings from the model's own ``rotary_emb`` module (every rope variant the model supports);
* attention of one query over the preallocated cache (``kv_cache.PreallocatedLayer``) as two batched matmuls with
  grouped heads (no repeated keys/values), masked where the left-padded prompt has no token;
* the model's own RMSNorm epsilon and activation; the last norm and ``lm_head`` on the one position.

The prompt prefill stays the model's own forward. The step needs the preallocated cache
(``rollout.preallocate_kv_cache``, default on); without it the rollout keeps the generic forward. Supported: ``model_type`` qwen2, llama, mistral (without a sliding
window shorter than the sequence) and qwen3 (per-head q/k norms); anything else -- or a module whose layout is not
the standard one -- returns ``None`` from `LeanDecoder.build` and the rollout keeps the generic forward. The results
equal the generic forward's within float tolerance (``tests/workers/rollout/test_lean_decode.py``). A LoRA policy (a
PEFT ``PeftModel``) runs the same step on merged weights, ``W + scaling * B @ A``, computed once per generation.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import rotate_half  # the rotary helper of the whole family

from verl.utils.lora import base_model, merged_weight

logger = logging.getLogger(__name__)

__all__ = ["LeanDecoder", "SUPPORTED_MODEL_TYPES"]

SUPPORTED_MODEL_TYPES = ("qwen2", "llama", "mistral", "qwen3")


def _linear(module: torch.nn.Module) -> torch.nn.Module:
    """The ``nn.Linear`` of a projection: itself, or the base layer a LoRA layer wraps."""
    return getattr(module, "base_layer", module)


def _weight(module: torch.nn.Module) -> torch.Tensor:
    """The projection's effective weight: a LoRA layer's base weight with its active adapters merged in."""
    base = getattr(module, "base_layer", None)
    if base is None:
        return module.weight
    a = {n: module.lora_A[n].weight for n in module.lora_A}
    b = {n: module.lora_B[n].weight for n in module.lora_B}
    return merged_weight(module, base.weight, a, b)


def _cat_biases(linears: list[torch.nn.Module]) -> torch.Tensor | None:
    """The biases of linear layers fused into one matmul (zeros for a layer without one), or None if none has one."""
    linears = [_linear(lin) for lin in linears]
    if all(lin.bias is None for lin in linears):
        return None
    return torch.cat(
        [lin.bias if lin.bias is not None else lin.weight.new_zeros(lin.weight.shape[0]) for lin in linears]
    )


class _Layer:
    __slots__ = (
        "qkv_w",
        "qkv_b",
        "o_w",
        "o_b",
        "gu_w",
        "gu_b",
        "down_w",
        "down_b",
        "act",
        "ln1",
        "ln2",
        "q_norm",
        "k_norm",
    )


class LeanDecoder:
    """Decode step ``logits = step(tokens, positions, cache, mask)`` for one new token per row.

    ``cache`` is the ``DynamicCache`` the model's own prefill returned, converted by ``kv_cache.preallocate``; each
    step appends the new keys/values through the layers' ``update`` so the cache stays usable by the generic forward
    and by ``batch_select_indices`` (retiring finished rows).
    """

    def __init__(self, module: torch.nn.Module):
        module = base_model(module)  # a LoRA PeftModel: the HF model inside, its adapters merged at each refresh
        cfg = module.config
        self.module = module
        self.model = module.model
        self.num_heads = int(cfg.num_attention_heads)
        self.num_kv_heads = int(getattr(cfg, "num_key_value_heads", None) or self.num_heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // self.num_heads)
        self.eps = float(cfg.rms_norm_eps)
        self.scaling = self.head_dim**-0.5
        self.layers: list[_Layer] = []

    # --------------------------------------------------------------------------------------------- construction
    @classmethod
    def build(cls, module: torch.nn.Module) -> LeanDecoder | None:
        """A decoder for ``module``, or ``None`` (with the reason logged) when it is not a supported layout."""
        reason = cls.unsupported_reason(module)
        if reason is not None:
            logger.info("lean decode step not used for %s: %s", type(module).__name__, reason)
            return None
        return cls(module)

    @staticmethod
    def unsupported_reason(module: torch.nn.Module) -> str | None:
        module = base_model(module)
        cfg = getattr(module, "config", None)
        model_type = getattr(cfg, "model_type", None)
        if model_type not in SUPPORTED_MODEL_TYPES:
            return f"model_type {model_type!r} is not one of {SUPPORTED_MODEL_TYPES}"
        model = getattr(module, "model", None)
        needed = ("embed_tokens", "layers", "norm", "rotary_emb")
        if model is None or not all(hasattr(model, name) for name in needed) or not hasattr(module, "lm_head"):
            return "not the standard <Model>.model.{embed_tokens,layers,norm,rotary_emb} + lm_head layout"
        if getattr(cfg, "use_sliding_window", False) or (
            model_type == "mistral" and getattr(cfg, "sliding_window", None) is not None
        ):
            return "sliding-window attention"
        types = getattr(cfg, "layer_types", None)
        if types is not None and any(t != "full_attention" for t in types):
            return f"layer types {sorted(set(types))}"
        if getattr(cfg, "pretraining_tp", 1) not in (None, 1):
            return "pretraining_tp > 1"
        for layer in model.layers:
            attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
            if (
                attn is None
                or mlp is None
                or not all(
                    isinstance(_linear(getattr(attn, p, None)), torch.nn.Linear)
                    for p in ("q_proj", "k_proj", "v_proj", "o_proj")
                )
            ):
                return "a layer without q/k/v/o_proj linear layers"
            if not all(
                isinstance(_linear(getattr(mlp, p, None)), torch.nn.Linear)
                for p in ("gate_proj", "up_proj", "down_proj")
            ):
                return "a layer without gate/up/down_proj linear layers"
            if not hasattr(mlp, "act_fn"):
                return "an MLP without act_fn"
        if not isinstance(module.lm_head, torch.nn.Linear) or not isinstance(model.embed_tokens, torch.nn.Embedding):
            return "lm_head or embed_tokens of a non-standard type"
        return None

    def refresh(self) -> None:
        """Concatenate the live q/k/v and gate/up weights (call at the start of each generation: the policy may
        have been updated since the last one)."""
        self.layers = []
        with torch.no_grad():
            for layer in self.model.layers:
                attn, mlp = layer.self_attn, layer.mlp
                t = _Layer()
                t.qkv_w = torch.cat([_weight(attn.q_proj), _weight(attn.k_proj), _weight(attn.v_proj)], dim=0)
                t.qkv_b = _cat_biases([attn.q_proj, attn.k_proj, attn.v_proj])
                t.o_w, t.o_b = _weight(attn.o_proj), _linear(attn.o_proj).bias
                t.gu_w = torch.cat([_weight(mlp.gate_proj), _weight(mlp.up_proj)], dim=0)
                t.gu_b = _cat_biases([mlp.gate_proj, mlp.up_proj])
                t.down_w, t.down_b = _weight(mlp.down_proj), _linear(mlp.down_proj).bias
                t.act = mlp.act_fn
                t.ln1, t.ln2 = layer.input_layernorm, layer.post_attention_layernorm
                t.q_norm, t.k_norm = getattr(attn, "q_norm", None), getattr(attn, "k_norm", None)
                self.layers.append(t)

    def release(self) -> None:
        self.layers = []

    # --------------------------------------------------------------------------------------------------- the step
    @torch.no_grad()
    def step(
        self, tokens: torch.Tensor, positions: torch.Tensor, cache: Any, key_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Logits (B, V) float32 of the next token after ``tokens`` (B,) at ``positions`` (B,).

        ``key_mask`` (B, L+1) bool: which cache positions (the L cached ones, then the new token) each row attends
        to, or ``None`` when every position is a real token.
        """
        if not self.layers:
            self.refresh()
        b = tokens.shape[0]
        h, kvh, d = self.num_heads, self.num_kv_heads, self.head_dim
        g = h // kvh
        x = self.model.embed_tokens(tokens)  # (B, H)
        cos, sin = self.model.rotary_emb(x.unsqueeze(1), positions.unsqueeze(1))  # (B, 1, d)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        bias = None
        if key_mask is not None:
            bias = torch.zeros(key_mask.shape, dtype=torch.float32, device=x.device)
            bias.masked_fill_(~key_mask, torch.finfo(torch.float32).min)
            bias = bias.view(b, 1, 1, -1)
        for i, t in enumerate(self.layers):
            qkv = F.linear(self._norm(x, t.ln1), t.qkv_w, t.qkv_b)
            qk = qkv[:, : (h + kvh) * d].view(b, h + kvh, d)
            if t.q_norm is not None:
                qk = torch.cat([t.q_norm(qk[:, :h]), t.k_norm(qk[:, h:])], dim=1)
            qk = qk * cos + rotate_half(qk) * sin  # q and k rotated together: one set of kernels
            q, k = qk[:, :h], qk[:, h:].unsqueeze(2)
            v = qkv[:, (h + kvh) * d :].view(b, kvh, 1, d)
            keys, values = cache.layers[i].update(k, v)  # (B, kvh, L+1, d) views of the preallocated buffers
            with torch.autocast(x.device.type, enabled=False):  # scores and softmax in fp32, as SDPA accumulates
                keys, values = keys.float(), values.float()  # no-ops for an fp32 cache; bf16 under rollout.dtype=bf16
                scores = torch.matmul(q.reshape(b, kvh, g, d).float(), keys.transpose(-1, -2)) * self.scaling
                if bias is not None:  # scores: (B, kvh, g, L+1)
                    scores = scores + bias
                attn = torch.matmul(torch.softmax(scores, dim=-1), values).reshape(b, h * d).to(qkv.dtype)
            x = x + F.linear(attn, t.o_w, t.o_b)
            gu = F.linear(self._norm(x, t.ln2), t.gu_w, t.gu_b)
            inter = gu.shape[-1] // 2
            x = x + F.linear(t.act(gu[:, :inter]) * gu[:, inter:], t.down_w, t.down_b)
        x = self._norm(x, self.model.norm)
        return self.module.lm_head(x).float()

    def _norm(self, x: torch.Tensor, norm: torch.nn.Module) -> torch.Tensor:
        eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
        return F.rms_norm(x, (x.shape[-1],), norm.weight, self.eps if eps is None else float(eps))

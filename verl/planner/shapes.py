"""A decoder-only transformer's shape, as the memory planner needs it: from a Hugging Face ``config.json`` (a model
directory, a PEFT adapter's base, a ``builtin://`` model) or from a size preset (``7b``: Qwen2.5-7B's shape).

Parameter counts follow the Llama/Qwen2 layout: embeddings (V x h), per layer q/k/v/o projections (with Qwen2's
q/k/v biases), a gated MLP (3 x h x I) and two RMSNorms, a final norm, and an untied lm_head (V x h) unless tied.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ModelShape:
    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    head_dim: int | None = None
    qkv_bias: bool = True

    @property
    def dim_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_heads

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.dim_head

    @property
    def kv_dim(self) -> int:
        """Width of the keys (and of the values) of one token in one layer: kv_heads x head_dim."""
        return self.num_kv_heads * self.dim_head

    def linear_shapes(self) -> list[tuple[int, int]]:
        """(in, out) of each linear layer of one decoder layer: q, k, v, o, gate, up, down."""
        h, i = self.hidden_size, self.intermediate_size
        return [(h, self.q_dim), (h, self.kv_dim), (h, self.kv_dim), (self.q_dim, h), (h, i), (h, i), (i, h)]

    @property
    def layer_params(self) -> int:
        bias = self.q_dim + 2 * self.kv_dim if self.qkv_bias else 0
        return sum(a * b for a, b in self.linear_shapes()) + bias + 2 * self.hidden_size

    @property
    def embedding_params(self) -> int:
        """Input embeddings plus the lm_head when it is not tied to them."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    @property
    def num_params(self) -> int:
        return self.embedding_params + self.num_layers * self.layer_params + self.hidden_size

    def lora_params(self, rank: int) -> int:
        """Trainable parameters of rank-``rank`` adapters on every linear layer of the decoder (``all-linear``):
        r x (in + out) per adapted matrix."""
        return self.num_layers * sum(rank * (a + b) for a, b in self.linear_shapes())


# name -> (hidden, layers, heads, kv heads, intermediate, vocab, tied, qkv bias): public configs of those models
PRESETS: dict[str, tuple[int, int, int, int, int, int, bool, bool]] = {
    "0.5b": (896, 24, 14, 2, 4864, 151936, True, True),  # Qwen2.5-0.5B
    "1.5b": (1536, 28, 12, 2, 8960, 151936, True, True),  # Qwen2.5-1.5B
    "3b": (2048, 36, 16, 2, 11008, 151936, True, True),  # Qwen2.5-3B
    "7b": (3584, 28, 28, 4, 18944, 152064, False, True),  # Qwen2.5-7B / Qwen2-7B
    "8b": (4096, 32, 32, 8, 14336, 128256, False, False),  # Llama-3.1-8B
    "14b": (5120, 48, 40, 8, 13824, 152064, False, True),  # Qwen2.5-14B
    "32b": (5120, 64, 40, 8, 27648, 152064, False, True),  # Qwen2.5-32B
    "70b": (8192, 80, 64, 8, 28672, 128256, False, False),  # Llama-3.1-70B
    "72b": (8192, 80, 64, 8, 29568, 152064, False, True),  # Qwen2.5-72B
}


def preset_shape(model_size: str) -> ModelShape:
    key = model_size.strip().lower()
    if key not in PRESETS:
        raise ValueError(
            f"--model_size {model_size!r} is not a known size: use one of {', '.join(PRESETS)}, "
            "or --model_path DIR to read a model's config.json"
        )
    h, n_layers, heads, kv, inter, vocab, tied, bias = PRESETS[key]
    return ModelShape(key, h, n_layers, heads, kv, inter, vocab, tied, qkv_bias=bias)


def shape_from_hf_config(config: dict, name: str = "model") -> ModelShape:
    """The shape in a ``config.json`` dict (Llama, Qwen2/3, Mistral and other decoder-only layouts)."""
    text = config.get("text_config") or config  # multimodal configs nest the language model's
    try:
        h = int(text["hidden_size"])
        heads = int(text["num_attention_heads"])
        shape = ModelShape(
            name=name,
            hidden_size=h,
            num_layers=int(text["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(text.get("num_key_value_heads") or heads),
            intermediate_size=int(text.get("intermediate_size") or 4 * h),
            vocab_size=int(text["vocab_size"]),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
            head_dim=text.get("head_dim"),
            qkv_bias=bool(text.get("attention_bias", text.get("model_type", "") in ("qwen2",))),
        )
    except KeyError as e:
        raise ValueError(f"{name}: config.json has no {e.args[0]!r}: not a decoder-only transformer config") from e
    return shape


def shape_from_model_path(path: str) -> ModelShape:
    """The shape of the model at ``path``: a HF model directory, a PEFT adapter directory (its base model's shape) or
    a ``builtin://`` model."""
    from verl.utils.model import resolve_model_path

    local = resolve_model_path(path)
    config_file = os.path.join(local, "config.json")
    if not os.path.isfile(config_file):  # a PEFT adapter directory
        with open(os.path.join(local, "adapter_config.json")) as f:
            base = json.load(f).get("base_model_name_or_path")
        return replace(shape_from_model_path(base), name=str(path))
    with open(config_file) as f:
        return shape_from_hf_config(json.load(f), name=str(path))

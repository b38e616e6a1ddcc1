"""The tiny-model kit: a byte-level tokenizer and small Qwen2/Llama models saved as ordinary HF directories.

No model hub is reachable from our machines, so tests, examples and the CPU quick start use models built here.
What this module writes is a plain HF directory (``config.json``, ``model.safetensors``, ``tokenizer.json``,
``tokenizer_config.json``); everything else in verl loads it with ``AutoTokenizer`` / ``AutoModelForCausalLM``,
exactly as it loads a user's ``Qwen2.5-0.5B-Instruct`` directory.

    python -m verl.models.tiny --out-dir /tmp/tiny-qwen2 --arch qwen2 --hidden-size 128 --num-layers 2
    python -m verl.models.tiny --out-dir /tmp/tiny-qwen2-tools --tools true     # tool-calling tokenizer + template
"""

from __future__ import annotations

import argparse
import os
from dataclasses import asdict, dataclass

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedModel, PreTrainedTokenizerFast, Qwen2Config

from verl.models.tool_chat_template import TOOL_CHAT_TEMPLATE, TOOL_TOKENS

# Qwen-style chat markers, so prompts look like the ones a real instruct model sees.
PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [PAD_TOKEN, IM_START, IM_END]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tokenizer(tools: bool = False) -> PreTrainedTokenizerFast:
    """A byte-level tokenizer with no merges: every byte is one token, so digits are single tokens.

    256 byte tokens + 3 specials. Any unicode text round-trips (it is split into UTF-8 bytes); ``<|im_end|>`` is
    the end-of-turn/EOS token, ``<|endoftext|>`` the pad token, as in Qwen2.

    ``tools=True``: the tool-calling variant. ``<tool_call>``, ``</tool_call>``, ``<tool_response>`` and
    ``</tool_response>`` become tokens 259..262 (not special, as in Qwen2.5, so decoding with
    ``skip_special_tokens=True`` keeps them for the tool-call parser) and the chat template renders tools, tool calls
    and tool messages (:mod:`verl.models.tool_chat_template`). Every other token keeps its id.
    """
    vocab: dict[str, int] = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIAL_TOKENS)
    if tools:
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=IM_END, pad_token=PAD_TOKEN, bos_token=None, unk_token=None
    )
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE if tools else CHAT_TEMPLATE
    tokenizer.padding_side = "left"  # decoder-only generation pads on the left
    return tokenizer


@dataclass
class TinyModelConfig:
    """Shape of a tiny causal LM. The defaults (~0.2M parameters) learn 2-digit addition on a CPU in about a minute."""

    arch: str = "qwen2"  # qwen2 | llama
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 512
    max_position_embeddings: int = 512
    tie_word_embeddings: bool = True
    seed: int = 0
    # None: the tokenizer's 259 tokens. A larger vocabulary (e.g. Qwen2.5's 151936) gives a random model a real
    # model's embedding and lm_head cost; ids past the tokenizer's decode to nothing.
    vocab_size: int | None = None
    # True: the tool-calling tokenizer and chat template (build_tokenizer(tools=True)), 263 tokens. None keeps the
    # cache key (and so the directory) of every tiny model built before this option existed.
    tools: bool | None = None


def build_model_config(tokenizer: PreTrainedTokenizerFast, cfg: TinyModelConfig):
    if cfg.vocab_size is not None and cfg.vocab_size < len(tokenizer):
        raise ValueError(
            f"TinyModelConfig.vocab_size={cfg.vocab_size} is smaller than the tokenizer's {len(tokenizer)} tokens: "
            "leave it None or raise it"
        )
    common = dict(
        vocab_size=cfg.vocab_size or len(tokenizer),
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        intermediate_size=cfg.intermediate_size,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=cfg.tie_word_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        rms_norm_eps=1e-6,
    )
    if cfg.arch == "qwen2":
        return Qwen2Config(**common)
    if cfg.arch == "llama":
        return LlamaConfig(**common)
    raise ValueError(f"unknown tiny-model arch {cfg.arch!r}: use 'qwen2' or 'llama'")


def build_tiny_model(tokenizer: PreTrainedTokenizerFast, cfg: TinyModelConfig | None = None) -> PreTrainedModel:
    """A randomly initialised causal LM; the same ``cfg.seed`` gives the same weights."""
    cfg = cfg or TinyModelConfig()
    config = build_model_config(tokenizer, cfg)
    devices = []  # fork_rng must not touch CUDA state on machines that have it
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(cfg.seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = None
    return model


def save_tiny_model(out_dir: str, cfg: TinyModelConfig | None = None) -> str:
    """Build a tokenizer and a tiny model and save both as one HF directory (safetensors). Returns ``out_dir``."""
    cfg = cfg or TinyModelConfig()
    tokenizer = build_tokenizer(tools=bool(cfg.tools))
    model = build_tiny_model(tokenizer, cfg)
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def save_tiny_classifier(
    out_dir: str, labels: tuple[str, ...] = ("non_toxic", "toxic"), cfg: TinyModelConfig | None = None
) -> str:
    """A randomly initialised tiny ``AutoModelForSequenceClassification`` directory with ``labels`` (one label: a
    scalar reward model), for reward-model and classifier-evaluator tests and examples. Returns ``out_dir``."""
    from transformers import AutoModelForSequenceClassification

    cfg = cfg or TinyModelConfig(hidden_size=32, num_layers=1, intermediate_size=64)
    tokenizer = build_tokenizer()
    config = build_model_config(tokenizer, cfg)
    config.num_labels = len(labels)
    config.id2label = dict(enumerate(labels))
    config.label2id = {name: i for i, name in enumerate(labels)}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = AutoModelForSequenceClassification.from_config(config)
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m verl.models.tiny", description="Write a tiny HF model + tokenizer directory."
    )
    parser.add_argument("--out-dir", required=True)
    defaults = TinyModelConfig()
    for name, value in asdict(defaults).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool) or name == "tools":
            parser.add_argument(flag, type=lambda s: s.lower() in ("1", "true", "yes"), default=value)
        elif value is None:  # vocab_size: an int when given
            parser.add_argument(flag, type=int, default=None)
        else:
            parser.add_argument(flag, type=type(value), default=value)
    args = vars(parser.parse_args(argv))
    out_dir = args.pop("out_dir")
    save_tiny_model(out_dir, TinyModelConfig(**args))
    model = AutoModelForCausalLM.from_pretrained(out_dir)
    print(f"wrote {out_dir} ({args['arch']}, {count_parameters(model):,} parameters)")


if __name__ == "__main__":
    main()

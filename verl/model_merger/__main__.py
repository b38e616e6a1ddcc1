"""``python -m verl.model_merger merge --backend fsdp --local_dir CKPT/global_step_N/actor --target_dir OUT``
``python -m verl.model_merger test --backend fsdp --local_dir CKPT/global_step_N/actor --test_hf_dir HF_DIR``

Public verl's merger CLI; see `verl.model_merger`. Only ``--backend fsdp`` (the only checkpoint format here). A LoRA
checkpoint (``lora_adapter/``) merges to its adapter in PEFT's format, or with ``--merge_lora`` to the base model with
the adapter merged in."""

from __future__ import annotations

import argparse
import sys

from verl.utils.cli import run_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verl.model_merger", description=__doc__.split("\n\n")[-1])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("merge", "write a checkpoint as a plain Hugging Face model directory"),
        ("test", "merge a checkpoint and compare it with a Hugging Face directory"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--backend", default="fsdp", help="fsdp (the only checkpoint format here)")
        p.add_argument("--local_dir", required=True, help="a role's checkpoint: .../global_step_N/actor or /critic")
        p.add_argument(
            "--hf_model_path",
            default=None,
            help="config source (default: <local_dir>/huggingface); of a LoRA checkpoint, the base model "
            "(default: base_model_name_or_path in <local_dir>/lora_adapter/adapter_config.json)",
        )
        p.add_argument("--trust-remote-code", dest="trust_remote_code", action="store_true")
        # accepted for ported scripts: the weights are read on CPU; values, tied embeddings come from the config
        p.add_argument("--use_cpu_initialization", action="store_true", help=argparse.SUPPRESS)
        p.add_argument("--tie-word-embedding", dest="tie_word_embedding", action="store_true", help=argparse.SUPPRESS)
        p.add_argument("--is-value-model", dest="is_value_model", action="store_true", help=argparse.SUPPRESS)
        if name == "merge":
            p.add_argument("--target_dir", default="tmp", help="where to write the HF directory")
            p.add_argument(
                "--merge_lora",
                action="store_true",
                help="LoRA checkpoint: write the base model with the adapter merged in (a full HF directory) "
                "instead of the adapter in PEFT's format",
            )
            p.add_argument("--hf_upload_path", default=None, help="not supported: no model hub is reachable")
            p.add_argument("--private", action="store_true", help=argparse.SUPPRESS)
        else:
            p.add_argument("--test_hf_dir", required=True, help="the HF directory to compare with")
    return parser


def main(argv: list[str] | None = None) -> int:
    from verl.model_merger import compare_with_hf, is_lora_checkpoint, merge_checkpoint

    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.backend != "fsdp":
        raise ValueError(
            f"--backend {args.backend}: checkpoints here are FSDP/DCP ones (dcp/ + huggingface/); use --backend fsdp"
        )
    if args.command == "merge":
        if args.hf_upload_path:
            raise ValueError("--hf_upload_path: uploading to a model hub is not supported; copy --target_dir instead")
        lora = is_lora_checkpoint(args.local_dir)
        if args.merge_lora and not lora:
            print(
                f"note: --merge_lora: {args.local_dir} is not a LoRA checkpoint (no lora_adapter/), its weights are "
                "whole already; merging it as usual",
                file=sys.stderr,
            )
        out = merge_checkpoint(
            args.local_dir, args.target_dir, args.hf_model_path, args.trust_remote_code, merge_lora=args.merge_lora
        )
        if lora and not args.merge_lora:
            print(f"merged {args.local_dir} into {out} (the LoRA adapter; --merge_lora for the full model)")
        elif lora:
            print(f"merged {args.local_dir} into {out} (the base model with the LoRA adapter merged in)")
        else:
            print(f"merged {args.local_dir} into {out}")
        return 0
    report = compare_with_hf(args.local_dir, args.test_hf_dir, args.hf_model_path)
    if report["ok"]:
        print(f"{args.local_dir} matches {args.test_hf_dir} (max abs diff {report['max_abs_diff']:.3g})")
        return 0
    print(
        f"{args.local_dir} differs from {args.test_hf_dir}: missing {report['missing']}, unexpected "
        f"{report['unexpected']}, mismatched {report['mismatched']} (max abs diff {report['max_abs_diff']:.3g})"
    )
    return 1


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))

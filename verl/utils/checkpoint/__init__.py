"""Saving checkpoints so that a crash mid-write never leaves a half-written directory behind.

`save_hf_checkpoint` writes a model as a Hugging Face directory; ``checkpoint_manager`` holds verl's
``BaseCheckpointManager`` (retention of a run's ``global_step_N`` directories) and the pointer-file helpers.
"""

from __future__ import annotations

import os
import shutil
import tempfile


def save_hf_checkpoint(model, tokenizer, out_dir: str) -> str:
    """Save ``model`` and ``tokenizer`` as a plain HF directory (safetensors), atomically.

    Written into a temporary sibling directory, then renamed into place: readers see the old checkpoint or the new
    one, never a mix. The result loads with ``AutoModelForCausalLM.from_pretrained(out_dir)``.
    """
    out_dir = os.path.abspath(out_dir)
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.tmp-", dir=parent)
    os.chmod(tmp, 0o755)  # mkdtemp makes it owner-only; a checkpoint is shared like any output directory
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        if os.path.exists(out_dir):
            old = tmp + ".old"
            os.replace(out_dir, old)
            try:
                os.replace(tmp, out_dir)
            except BaseException:
                os.replace(old, out_dir)  # put the previous checkpoint back: readers see it, not nothing
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir

#!/usr/bin/env bash
# An SFT script written for public verl (examples/sft/gsm8k/run_qwen_05_sp2.sh's keys) runs here as it is: the prompt
# and the response come from extra_info.question / extra_info.answer (prompt_dict_keys / response_dict_keys), the
# entry point is verl's module name, and Ulysses / padding-removal keys are accepted. Only the data, the model and the
# sizes are changed for a 2-core CPU. Extra key=value overrides are appended.
set -euo pipefail
save_path=${SAVE_PATH:-outputs/verl-sft/arithmetic-verl-style}
torchrun --standalone --nnodes=1 --nproc_per_node=1 \
    -m verl.trainer.fsdp_sft_trainer \
    data.train_files=builtin://arithmetic/train \
    data.val_files=builtin://arithmetic/test \
    data.prompt_key=extra_info \
    data.response_key=extra_info \
    optim.lr=3e-3 \
    data.prompt_dict_keys=['question'] \
    +data.response_dict_keys=['answer'] \
    data.micro_batch_size_per_gpu=64 \
    model.partial_pretrain=builtin://tiny-qwen2 \
    trainer.default_local_dir="$save_path" \
    trainer.project_name=arithmetic-sft \
    trainer.experiment_name=arithmetic-sft-tiny-qwen2 \
    trainer.logger=console \
    trainer.total_epochs=1 \
    ulysses_sequence_parallel_size=1 \
    use_remove_padding=true \
    "$@"

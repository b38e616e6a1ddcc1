"""vLLM rollout engine (``rollout.name=vllm``); vLLM itself is imported only when an engine is built."""

from verl.workers.rollout.vllm_rollout.vllm_rollout import row_seed, vllm_engine_kwargs, vLLMRollout

__all__ = ["vLLMRollout", "row_seed", "vllm_engine_kwargs"]

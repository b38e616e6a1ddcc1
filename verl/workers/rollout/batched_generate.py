"""`BatchedGenerate`: the per-request ``async generate`` of the rollout interface, for engines that decode requests
in batches (`HFRollout`, `vLLMRollout`).

What every engine's per-request call shares lives here, so the engines agree on it: requests are numbered in the
order ``generate`` is called (the number keys the request's draws, never its batch), each request is checked by
`request_params.resolve_request` before it joins a batch (a bad one raises ``ValueError`` naming its
``request_id`` and never reaches the engine), ``max_tokens=0`` is answered without the engine, and a `RequestBatcher`
gathers concurrent requests into one call of the engine's ``_decode_requests`` on one worker thread, leaving the
event loop free for the agent loop's tool calls. ``get_rng_state``/``set_rng_state`` carry ``(seed, calls,
requests)`` so a resumed run replays the requests after a checkpoint.

An engine supplies ``config`` (a ``RolloutConfig``), ``eos_token_ids``, ``seed``, ``calls`` (its batch-call
counter) and four methods: ``_decode_requests(specs) -> [TokenOutput]`` (one batch, in order; it holds the engine's
lock itself, since the trainer's batch call may run on another thread), ``_vocab_size()``, ``_max_model_len()``
(None: no limit known) and ``_request_batch_limit()`` (requests per batch at most).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from verl.workers.rollout.base import TokenOutput
from verl.workers.rollout.request_batcher import RequestBatcher
from verl.workers.rollout.request_params import RequestSpec, resolve_request

__all__ = ["BatchedGenerate"]


class BatchedGenerate:
    """Mixin (listed before `BaseRollout`): the per-request ``generate`` over the engine's batched decode."""

    # per-request state an engine need not set up: each becomes the instance's own on first assignment
    requests: int = 0  # generate calls so far: each request's number keys its draws
    request_window_s: float = 0.002  # how long the first of concurrent requests waits for others to join
    _batcher: RequestBatcher | None = None
    _executor: ThreadPoolExecutor | None = None

    # -------------------------------------------------------------------------------------------- the engine's part

    def _decode_requests(self, requests: list[RequestSpec]) -> list[TokenOutput]:
        raise NotImplementedError

    def _vocab_size(self) -> int | None:
        raise NotImplementedError

    def _max_model_len(self) -> int | None:
        raise NotImplementedError

    def _request_batch_limit(self) -> int:
        raise NotImplementedError

    # ----------------------------------------------------------------------------------------------------- shared

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
        priority: int = 0,
    ) -> TokenOutput:
        """One request's response, decoded in a batch with the requests that arrive with it (the keys of
        ``sampling_params``: `request_params`). ``priority`` is accepted and unused (requests run in arrival order).
        A bad request raises ``ValueError`` naming it; the others run on."""
        number = self.requests  # taken before any await: requests are numbered in the order generate is called
        self.requests += 1
        if image_data or video_data:
            raise ValueError(f"rollout generate request {request_id!r}: image/video inputs need a multimodal engine")
        spec = resolve_request(
            request_id,
            prompt_ids,
            sampling_params,
            config=self.config,
            eos_token_ids=self.eos_token_ids,
            number=number,
            seed=self.seed,
            vocab_size=self._vocab_size(),
            max_model_len=self._max_model_len(),
        )
        if spec.max_tokens == 0:
            return TokenOutput(
                token_ids=[], log_probs=[], stop_reason="completed", num_preempted=0, finish_reason="length"
            )
        if self._executor is None:  # one thread: decodes leave the event loop free for the agent loop's other work
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{type(self).__name__}-requests")
        self._batcher = RequestBatcher.for_running_loop(
            self._batcher,
            run_batch=self._decode_requests,
            max_batch_size=max(1, self._request_batch_limit()),
            window_s=self.request_window_s,
            executor=self._executor,
        )
        return await self._batcher.submit(spec)

    def get_rng_state(self) -> torch.Tensor:
        """``(seed, calls, requests)`` as an int64 tensor, for checkpointing."""
        return torch.tensor([self.seed, self.calls, self.requests], dtype=torch.int64)

    def set_rng_state(self, state: torch.Tensor) -> None:
        """Restore a state from `get_rng_state`; the following samples replay those drawn after it was taken. A
        ``(seed, calls)`` state (written before per-request generation existed) restarts the request count at 0."""
        state = torch.as_tensor(state)
        if state.dtype != torch.int64 or state.numel() not in (2, 3):
            raise ValueError(
                f"{type(self).__name__}.set_rng_state: expected the (seed, calls, requests) int64 tensor of "
                "get_rng_state; this checkpoint was written by an older sampler -- resume it with the version that "
                "wrote it, or start over"
            )
        self.seed, self.calls = int(state[0]), int(state[1])
        self.requests = int(state[2]) if state.numel() == 3 else 0

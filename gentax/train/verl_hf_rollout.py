"""verl rollout backend ``hf``: plain transformers generation behind verl's server interface
(docs/training.md section 5.2; registered by gentax/train/verl_plugin.py).

- ``HFReplica`` (trainer side): one replica per GPU, beside that GPU's FSDP worker (hybrid mode);
  ``launch_servers`` starts one ``HFGenerationServer`` Ray actor pinned to the worker's GPU.
- ``HFGenerationServer``: one copy of the policy (bf16 on a GPU, fp32 on CPU) answering verl's
  token-in/token-out ``generate`` with a ``TokenOutput``. Requests that arrive while a batch runs
  join the next one, each batch ONE call of ``HFGenerator.generate_ids`` (raw log-probs, the EOS
  token kept, as vLLM's default). ``extra_fields["global_steps"]`` is the weights' version (0 before
  the first sync). verl's lifecycle calls are answered; the weights stay throughout, and only the
  prefill KV kept for the next turn (``HFGenerator.reuse_prefix``) is dropped on sleep or a cache clear.
- ``HFServerAdapter`` (FSDP worker side): ``update_weights`` iterates verl's generator of full
  HF-named tensors (every rank must: the gather is collective), copies them to CPU in buckets of
  ``checkpoint_engine.update_weights_bucket_megabytes`` and loads each into its rank's server.

Limits (each a clear error): tensor parallel 1; hybrid mode; text only; no ``top_k`` or
``repetition_penalty``; LoRA needs ``model.lora.merge=true``. The server's copy sits beside the FSDP
shards on the same GPU and never sleeps: for machines without vLLM and small runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generator, Iterable

import ray
import torch
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from verl.plugin.platform import get_platform
from verl.utils.device import get_resource_name
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

from gentax.errors import GentaxError

log = logging.getLogger(__name__)

NAME = "hf"
SERVER_PREFIX = "hf_server_"
#: a folder where each server writes its counters (tokens, seconds, weight syncs) after every sync
STATS_ENV = "GENTAX_HF_ROLLOUT_STATS"


def server_name(replica_rank: int) -> str:
    """Ray actor name of a replica's server (the adapter finds its server by it)."""
    return f"{SERVER_PREFIX}{replica_rank}"


def bucketed(weights: Iterable[tuple[str, torch.Tensor]], bucket_bytes: int) -> Generator[list, None, None]:
    """(name, tensor) pairs copied to CPU, grouped into lists of about ``bucket_bytes``."""
    bucket, size = [], 0
    for name, tensor in weights:
        cpu = tensor.detach().to("cpu", copy=True)
        bucket.append((name, cpu))
        size += cpu.numel() * cpu.element_size()
        if size >= bucket_bytes:
            yield bucket
            bucket, size = [], 0
    if bucket:
        yield bucket


class HFGenerationServer:
    """One copy of the policy serving verl's generate calls (a Ray actor; see the module doc)."""

    def __init__(self, model_path: str, *, replica_rank: int, seed: int, response_length: int, max_model_len: int,
                 max_batch_size: int, cuda_visible_devices: str | None = None):
        if cuda_visible_devices is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices  # before CUDA initialises here
        from gentax.rollout.generators import HFGenerator

        device = "cuda" if torch.cuda.is_available() else "cpu"
        # bf16 on a GPU (what the FSDP actor computes in); fp32 on CPU, where bf16 is slow on most CPUs
        self.generator = HFGenerator(model_path, device=device, dtype="bfloat16" if device == "cuda" else "float32",
                                     max_batch_size=max_batch_size)
        # the tensors a weight sync writes into, by HF name (tied weights under both names); copy_
        # keeps them in place, so one lookup table serves every bucket of every sync
        self._tensors = self.generator.model.state_dict(keep_vars=True)
        self.replica_rank, self.seed = int(replica_rank), int(seed)
        self.response_length, self.max_model_len = int(response_length), int(max_model_len)
        self.global_steps = 0
        self.requests = 0
        self.stats = {"batches": 0, "requests": 0, "prompt_tokens": 0, "response_tokens": 0, "generate_s": 0.0,
                      "weight_syncs": 0, "weight_load_s": 0.0}
        self._pending: list[tuple[list[int], Any, asyncio.Future]] = []
        self._batcher: asyncio.Task | None = None
        # one thread: generation and weight loads never overlap, and the event loop stays free
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf-generate")

    # ---- generation --------------------------------------------------------------------------
    def _sampling(self, prompt_len: int, sampling_params: dict[str, Any]):
        from gentax.rollout.generators import SamplingParams, derive_seed

        top_k = sampling_params.get("top_k", -1)
        if top_k not in (None, -1, 0):
            raise GentaxError(f"rollout 'hf' does not support top_k={top_k} (set rollout.top_k=-1)")
        if float(sampling_params.get("repetition_penalty", 1.0)) != 1.0:
            raise GentaxError("rollout 'hf' does not support repetition_penalty != 1.0")
        room = self.max_model_len - prompt_len
        if room < 1:
            raise GentaxError(f"prompt of {prompt_len} tokens leaves no room within max_model_len={self.max_model_len}")
        limit = sampling_params.get("max_tokens") or sampling_params.get("max_new_tokens") or self.response_length
        self.requests += 1
        return SamplingParams(
            temperature=float(sampling_params.get("temperature", 1.0)),
            top_p=float(sampling_params.get("top_p", 1.0)),
            max_new_tokens=max(1, min(int(limit), room)),
            seed=derive_seed(self.seed, self.replica_rank, self.requests),
            stop=(),  # as verl's vLLM server: stop at EOS or the token limit only
        )

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       image_data=None, video_data=None, **kwargs):
        if image_data is not None or video_data is not None or kwargs.get("audio_data") is not None:
            raise GentaxError("rollout 'hf' is text only")
        prompt_ids = [int(t) for t in prompt_ids]
        params = self._sampling(len(prompt_ids), dict(sampling_params))
        future = asyncio.get_running_loop().create_future()
        self._pending.append((prompt_ids, params, future))
        if self._batcher is None or self._batcher.done():
            self._batcher = asyncio.ensure_future(self._run_batches())
        generation = await future
        return TokenOutput(
            token_ids=list(generation.response_ids),
            log_probs=list(generation.logprobs) if sampling_params.get("logprobs") else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    async def _run_batches(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            await asyncio.sleep(0)  # requests sent in the same tick join this batch
            batch = self._pending[: self.generator.max_batch_size * 4]
            del self._pending[: len(batch)]
            start = time.perf_counter()
            try:
                outputs = await loop.run_in_executor(
                    self._executor, self.generator.generate_ids, [b[0] for b in batch], [b[1] for b in batch])
            except Exception as exc:  # every waiting request gets the error, the server lives on
                for *_, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            self.stats["batches"] += 1
            self.stats["requests"] += len(batch)
            self.stats["prompt_tokens"] += sum(len(b[0]) for b in batch)
            self.stats["response_tokens"] += sum(len(o.response_ids) for o in outputs)
            self.stats["generate_s"] += time.perf_counter() - start
            for (*_, future), output in zip(batch, outputs):
                if not future.done():
                    future.set_result(output)

    # ---- weights -----------------------------------------------------------------------------
    def _load(self, named_tensors: list[tuple[str, torch.Tensor]]) -> None:
        params = self._tensors
        unknown = [name for name, _ in named_tensors if name not in params]
        if unknown:
            raise GentaxError(f"weight sync: the rollout model has no tensor(s) {unknown[:5]}")
        with torch.no_grad():
            for name, tensor in named_tensors:
                target = params[name]
                if tuple(target.shape) != tuple(tensor.shape):
                    raise GentaxError(f"weight sync: {name} has shape {tuple(tensor.shape)}, "
                                      f"the rollout model's is {tuple(target.shape)}")
                target.copy_(tensor.to(device=target.device, dtype=target.dtype))

    async def load_weights(self, named_tensors: list[tuple[str, torch.Tensor]]) -> int:
        start = time.perf_counter()
        await asyncio.get_running_loop().run_in_executor(self._executor, self._load, named_tensors)
        self.stats["weight_load_s"] += time.perf_counter() - start
        return len(named_tensors)

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = int(global_steps)
        self.stats["weight_syncs"] += 1
        folder = os.environ.get(STATS_ENV)
        if folder:  # the GPU smoke reads the backend's own throughput here
            from gentax.io import write_json

            write_json(os.path.join(folder, f"{server_name(self.replica_rank)}.json"), await self.get_stats())

    # ---- what verl's replica and trainer call ------------------------------------------------
    async def get_stats(self) -> dict[str, Any]:
        generator = {k: self.generator.stats[k]  # its prefill levers, and its prefill / decode split
                     for k in ("prefill_positions", "reused_tokens", "prefill_s", "decode_s")}
        return {**self.stats, **generator, "global_steps": self.global_steps, "device": str(self.generator.device)}

    async def wake_up(self, tags: list[str] | None = None) -> None:
        """The weights never leave the server: nothing to restore."""

    async def sleep(self) -> None:
        """The weights stay for the next step (see the module doc); the prefill KV the generator
        keeps for the next turn's prompts (``HFGenerator.reuse_prefix``) is released."""
        self.generator.clear_prefix_cache()

    async def clear_kv_cache(self) -> None:
        """Only the prefill KV kept for the next turn's prompts outlives a batch: dropped."""
        self.generator.clear_prefix_cache()

    async def release_kv_cache(self) -> None:
        """Only the prefill KV kept for the next turn's prompts outlives a batch: dropped."""
        self.generator.clear_prefix_cache()

    async def resume_kv_cache(self) -> None:
        """Nothing to restore: the next batch prefills what it needs."""

    async def wait_for_requests_to_drain(self) -> None:
        while self._pending or (self._batcher is not None and not self._batcher.done()):
            await asyncio.sleep(0.01)

    async def abort_all_requests(self, reject_request: bool = False, **kwargs) -> dict[str, Any]:
        """Requests run to completion (a batch cannot be cut short); nothing is aborted."""
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self) -> None:
        """Generation is never paused."""

    async def start_profile(self, **kwargs) -> None:
        """No profiler in this backend."""

    async def stop_profile(self) -> None:
        """No profiler in this backend."""


class HFReplica(RolloutReplica):
    """One ``HFGenerationServer`` beside the FSDP worker of one GPU (see the module doc)."""

    async def launch_servers(self):
        if self.world_size != 1:
            raise GentaxError(f"rollout 'hf' runs one server per GPU: set rollout tensor/data/pipeline parallel "
                              f"sizes to 1 (world size {self.world_size})")
        if not self.workers:
            raise GentaxError("rollout 'hf' runs in hybrid mode only (a server beside each FSDP worker)")
        node_id, devices = await self.workers[0].__ray_call__.remote(
            lambda worker: (ray.get_runtime_context().get_node_id(),
                            ray.get_runtime_context().get_accelerator_ids().get(get_resource_name(), [])))
        env_vars = {var: "1" for var in get_platform().ray_noset_envvars()}  # keep our CUDA_VISIBLE_DEVICES
        cuda_visible = str(devices[0]) if devices else None
        if cuda_visible is not None:
            env_vars["CUDA_VISIBLE_DEVICES"] = cuda_visible
        name = server_name(self.replica_rank)
        cfg = self.config
        server = ray.remote(HFGenerationServer).options(
            name=name,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
            runtime_env={"env_vars": env_vars},
            max_concurrency=self.max_concurrency,
        ).remote(
            str(self.model_config.get("local_path") or self.model_config.path),
            replica_rank=self.replica_rank,
            seed=int(cfg.seed or 0),
            response_length=int(cfg.response_length),
            max_model_len=int(cfg.max_model_len or (cfg.prompt_length + cfg.response_length)),
            max_batch_size=int(min(cfg.max_num_seqs, 64)),
            cuda_visible_devices=cuda_visible,
        )
        await server.get_stats.remote()  # the model is loaded once this answers
        self.servers = [server]
        self._server_handle = server
        self._server_address = name  # no HTTP endpoint: verl's router keys servers by this


class HFServerAdapter(BaseRollout):
    """Worker-side rollout of ``hf``: weight sync into this rank's server (see the module doc)."""

    def __init__(self, config, model_config, device_mesh, replica_rank: int = -1, **kwargs):
        super().__init__(config, model_config, device_mesh)
        if self.config.tensor_model_parallel_size != 1:
            raise GentaxError("rollout 'hf' needs tensor_model_parallel_size=1")
        self.replica_rank = int(os.environ.get("RANK", 0)) if replica_rank == -1 else int(replica_rank)
        self.bucket_bytes = int(self.config.checkpoint_engine.update_weights_bucket_megabytes) << 20
        self.server_handle = None

    def _server(self):
        if self.server_handle is None:
            self.server_handle = ray.get_actor(server_name(self.replica_rank))
        return self.server_handle

    async def resume(self, tags: list[str]):
        """The server keeps its weights and no cache between steps: nothing to resume."""

    async def release(self):
        """Nothing is released (see ``HFGenerationServer.sleep``)."""

    @torch.no_grad()
    async def update_weights(self, weights, global_steps: int | None = None, wire_format: str = "named_tensors",
                             peft_config=None, **kwargs):
        if wire_format != "named_tensors":
            raise GentaxError(f"rollout 'hf' takes full named tensors, not wire_format={wire_format!r}")
        if peft_config is not None:
            raise GentaxError("rollout 'hf' with LoRA needs actor_rollout_ref.model.lora.merge=true")
        server = self._server()
        for bucket in bucketed(weights, self.bucket_bytes):  # every rank iterates: the gather is collective
            await server.load_weights.remote(bucket)
        if global_steps is not None:
            await server.set_global_steps.remote(int(global_steps))

"""How the pods of one vLLM replica form its distributed group.

Inside one pod, vLLM's multiprocessing executor runs every rank. Across the pods of a
LeaderWorkerSet group (one per node) there are two ways, by release:

- ``mp``: every pod runs ``vllm serve`` with ``--nnodes N --node-rank R --master-addr <leader>
  --master-port P``; the leader (rank 0) serves the API, the others add ``--headless`` and run
  only their workers (vllm/entrypoints/cli/serve.py@v0.19.0 ``run_headless``: "Run headless
  workers (for multi-node PP/TP)" when ``node_rank_within_dp > 0``). The first release whose
  parser has ``--nnodes`` is the first that can (engines/vllm/flags.py); the same code is in
  0.11.1 (vllm/v1/executor/multiproc_executor.py@v0.11.1, ``nnodes_within_dp``).
- ``ray``: the leader starts a Ray head, waits for every worker pod to join it as a Ray node,
  then runs ``vllm serve --distributed-executor-backend ray``; workers run only ``ray start``.
  This is the only way before ``--nnodes``; the wheels stop requiring Ray from 0.18.0 (their
  METADATA has no ``Requires-Dist: ray``), so a newer image may not contain it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from llmdeploy.engines.vllm import flags
from llmdeploy.engines.vllm.spec import VllmEngine
from llmdeploy.plan.group import LEADER_ADDRESS_ENV, WORKER_INDEX_ENV

Backend = Literal["mp", "ray"]
Role = Literal["leader", "worker"]

# vLLM's own default (ParallelConfig.master_port, vllm/config/parallel.py@v0.19.0), rendered
# explicitly so that the worker's wait for the leader and the docs name the same port.
MASTER_PORT = 29501
RAY_PORT = 6379  # Ray's default GCS port
# The release from which the wheels no longer depend on Ray (checked in every wheel's METADATA).
RAY_DROPPED_FROM = (0, 18, 0)


@dataclass(frozen=True)
class Distributed:
    """One pod's part in its replica: ``pp`` stages over ``nodes`` pods (one per node)."""

    pp: int = 1
    nodes: int = 1
    backend: Backend | None = None  # across nodes only
    role: Role = "leader"


def multinode_backend(engine: VllmEngine) -> Backend:
    """The spec's executor, or ``mp`` from the first release whose parser has ``--nnodes``
    and ``ray`` before it."""
    if engine.distributed_executor_backend != "auto":
        return engine.distributed_executor_backend
    return "mp" if flags.flag_spec("nnodes", engine.version) is not None else "ray"


def ray_missing(engine: VllmEngine) -> bool:
    """Whether the default image of this release may lack Ray (its wheel does not require it)."""
    return engine.image is None and flags.parse_version(engine.version) >= RAY_DROPPED_FROM


def distributed_options(dist: Distributed) -> dict[str, object]:
    """The server options that place this pod in its replica (flags-table keys)."""
    opts: dict[str, object] = {"pipeline_parallel_size": dist.pp if dist.pp > 1 else None}
    if dist.nodes == 1:
        return opts
    opts["distributed_executor_backend"] = dist.backend
    if dist.backend == "mp":
        worker = dist.role == "worker"
        opts.update(
            nnodes=dist.nodes,
            node_rank=flags.EnvRef(WORKER_INDEX_ENV) if worker else 0,
            master_addr=flags.EnvRef(LEADER_ADDRESS_ENV),
            master_port=MASTER_PORT,
            headless=True if worker else None,
        )
    return opts

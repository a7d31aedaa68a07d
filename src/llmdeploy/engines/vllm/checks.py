"""What vLLM cannot serve as the spec asks, known before sizing: the engine's ``check``.

``llmdeploy size`` and ``render`` both run it (:mod:`llmdeploy.spec.checks`), so a version or a
flag the pinned release does not accept is an error of ``size`` too, not only of ``render``.
"""

from __future__ import annotations

from collections.abc import Sequence

from llmdeploy.catalog.ec2 import Instance
from llmdeploy.engines.vllm.budget import vllm_facts
from llmdeploy.engines.vllm.distributed import Distributed, multinode_backend, ray_missing
from llmdeploy.engines.vllm.options import server_args
from llmdeploy.engines.vllm.spec import VllmEngine
from llmdeploy.errors import Diagnostic, UnsupportedFlagError, UnsupportedVersionError
from llmdeploy.spec.sections import Spec


def problems(spec: Spec, hardware: Sequence[Instance]) -> list[Diagnostic]:
    engine = spec.engine
    assert isinstance(engine, VllmEngine)
    out: list[Diagnostic] = []
    # every flag the plan renders, against the pinned release's parser (`--quantization fp8`
    # whenever the spec asks for FP8: the plan passes it for a 16-bit checkpoint); for a
    # replica on several nodes (`auto`: at least two) the leader's and the workers' flags
    quantization = "fp8" if spec.quantization == "fp8" else None
    nodes = spec.hardware.nodes_per_replica
    layouts = [Distributed(pp=spec.hardware.pipeline_parallel or 1)]
    if nodes != 1:
        count = 2 if nodes == "auto" else nodes
        backend = multinode_backend(engine)
        layouts = [Distributed(count, count, backend, role) for role in ("leader", "worker")]
    try:
        for dist in layouts:
            server_args(spec, quantization, dist)
    except (UnsupportedFlagError, UnsupportedVersionError) as exc:
        hint = None
        if nodes != 1 and "--nnodes" in exc.message:
            hint = "pin vLLM 0.11.1 or later, or `engine.distributedExecutorBackend: ray`"
        out.append(
            Diagnostic(f"`engine.version`: {exc.message}", field="engine.version", hint=hint)
        )
    if engine.extra_args or engine.env:  # imported only then: no start-up cost otherwise
        from llmdeploy.engines.vllm import extra

        out.extend(extra.problems(engine))
    if nodes != 1:
        out.extend(_multinode(spec, engine, hardware))
    # V1 (0.8.0 and later) always chunks prefill (shared/reference/vllm.md §1.2); the plan
    # renders --enable-chunked-prefill only for true, so false would change nothing.
    if not spec.serving.chunked_prefill and vllm_facts(engine.version).v1:
        out.append(
            Diagnostic(
                f"`serving.chunkedPrefill` false has no effect: vLLM {engine.version} always "
                "chunks prefill (V1 engine, from 0.8.0)",
                field="serving.chunkedPrefill",
                severity="warning",
                hint="remove the key",
            )
        )
    return out


def _multinode(spec: Spec, engine: VllmEngine, hardware: Sequence[Instance]) -> list[Diagnostic]:
    """What the image must bring for a replica on several nodes."""
    out: list[Diagnostic] = []
    backend = multinode_backend(engine)
    when = (
        "if `nodesPerReplica: auto` chooses several nodes, "
        if spec.hardware.nodes_per_replica == "auto"
        else ""
    )
    if backend == "ray" and ray_missing(engine):
        out.append(
            Diagnostic(
                f"{when}the ray executor needs Ray in the image, and vLLM {engine.version}'s "
                "wheel no longer requires it (from 0.18.0): vllm/vllm-openai images may lack it",
                field="engine.distributedExecutorBackend"
                if engine.distributed_executor_backend != "auto"
                else "engine.version",
                severity="warning",
                hint="use `distributedExecutorBackend: mp` (the default from 0.11.1), or an "
                "`engine.image` with Ray",
            )
        )
    efa = spec.hardware.efa is not False and any(i.efa_interfaces for i in hardware)
    if efa and engine.image is None:
        out.append(
            Diagnostic(
                f"{when}the default image vllm/vllm-openai:v{engine.version} has no libfabric or "
                "aws-ofi-nccl (vllm-project/vllm#55635): NCCL falls back to TCP sockets "
                "(`NET/Socket` in the NCCL_DEBUG log) without an error, and traffic between "
                "the nodes does not use EFA",
                field="hardware.nodesPerReplica",
                severity="warning",
                hint="set `engine.image` to a vLLM image with the EFA userspace (the AWS Deep "
                "Learning Containers vLLM images bundle it), and check for `NET/OFI` in the log",
            )
        )
    return out

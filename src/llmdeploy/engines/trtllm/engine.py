"""TensorRT-LLM behind the engine interface (:class:`llmdeploy.engines.base.Engine`): the pinned
engine-build path (Triton) or the PyTorch-backend path (trtllm-serve), as ``engine.backend``
says (``TrtllmEngine.path``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from llmdeploy.engines.base import Ignored, ReleaseDate

if TYPE_CHECKING:
    from llmdeploy.catalog.architecture import Architecture, CheckpointQuant
    from llmdeploy.catalog.ec2 import Instance
    from llmdeploy.engines.trtllm.spec import TrtllmEngine
    from llmdeploy.errors import Diagnostic
    from llmdeploy.perf.constants import EngineRun
    from llmdeploy.plan.types import EngineParts
    from llmdeploy.sizing.types import MemoryBudget, Sizing, SizingRequest
    from llmdeploy.spec.fields import EngineSection
    from llmdeploy.spec.sections import Spec


def _section(section: EngineSection) -> TrtllmEngine:
    from llmdeploy.engines.trtllm.spec import TrtllmEngine

    assert isinstance(section, TrtllmEngine)
    return section


# Both paths start the ranks of a model that spans hosts from an MPI launcher: mpirun for the
# engine path (launch_triton_server.py --world_size), and `trtllm-llmapi-launch` under
# mpirun/srun for trtllm-serve (TensorRT-LLM tensorrt_llm/llmapi/trtllm-llmapi-launch,
# /work/notes/trtllm-llmapi.md). Across pods, LWS's own TensorRT-LLM example makes mpirun
# reach the other pods through `kubectl exec` (--mca plm_rsh_agent kubessh and a Role with
# pods/exec; kubernetes-sigs/lws@v0.10.0 docs/examples/tensorrt-llm/build/server.py, rbac.yaml).
MULTINODE_REASON = (
    "llmdeploy serves TensorRT-LLM in one pod with tensor parallelism only: spreading its "
    "ranks over several pods needs mpirun to start them in the other pods through "
    "`kubectl exec` (a Role with pods/exec for the serving pods), which llmdeploy does not "
    "render"
)
MULTINODE_HINT = (
    "use `engine.type: vllm` for a replica on several nodes, or a quantization that fits one node"
)


# trtllm-build's own default max_batch_size from 0.14 (release notes; engines/trtllm/flags.py)
MAX_BATCH_SIZE_CAP = 2048


class Trtllm:
    max_sequences_cap = MAX_BATCH_SIZE_CAP
    name = "trtllm"
    # where plan-stage version errors are reported: the Triton pin of the default (engine) path
    # (the PyTorch path's version is checked at engine.version when the spec loads)
    version_field = "engine.tritonVersion"
    # The engine build quantizes a 16-bit checkpoint (quantize.py / convert_checkpoint.py); the
    # PyTorch backend quantizes nothing at load (sizing_fields narrows this for that path).
    runtime_quantizations = frozenset({"fp8", "int8", "int4-awq", "int4-gptq"})
    ignored_fields: ClassVar[Mapping[str, Ignored]] = {
        "serving.gpuMemoryUtilization": Ignored(
            "error",
            "TensorRT-LLM gives the KV cache a fraction of the memory left free after loading, "
            "not of the total",
            "set engine.kvCacheFreeGpuMemFraction instead",
        ),
        "serving.maxNumSeqs": Ignored(
            "error",
            "TensorRT-LLM schedules up to engine.maxBatchSize sequences (trtllm-build and "
            "trtllm-serve --max_batch_size)",
            "set engine.maxBatchSize instead",
        ),
        # one pod, tensor parallelism only (MULTINODE_REASON)
        **{
            field: Ignored("error", MULTINODE_REASON, MULTINODE_HINT)
            for field in (
                "hardware.nodesPerReplica",
                "hardware.pipelineParallel",
                "hardware.efa",
            )
        },
        "model.servedName": Ignored(
            "warning",
            "Triton serves the model under its model-repository names (`ensemble`), and "
            "trtllm-serve up to 1.2.x has no --served_model_name (/v1/models reports the model "
            "argument)",
            "remove it, or use engine.type vllm for a name of your choice",
        ),
        "hardware.dataParallel": Ignored(
            "error",
            "llmdeploy renders TensorRT-LLM as one group of tensorParallel ranks per pod",
            "scale out with replicas (autoscaling), or use engine.type vllm",
        ),
        "serving.expertParallel": Ignored(
            "error",
            "TensorRT-LLM's expert parallelism is not rendered by llmdeploy",
            "use engine.type vllm",
        ),
        "serving.multimodal": Ignored(
            "error",
            "the encoder options are vLLM's (--limit-mm-per-prompt, --skip-mm-profiling)",
            "use engine.type vllm",
        ),
    }

    def check(self, spec: Spec, hardware: Sequence[Instance]) -> list[Diagnostic]:
        from llmdeploy.engines.trtllm.checks import problems

        return problems(spec, hardware)

    def version(self, section: EngineSection) -> str:
        engine = _section(section)
        if engine.path == "pytorch":
            from llmdeploy.engines.trtllm.releases import DEFAULT_TRTLLM_VERSION

            return engine.version or DEFAULT_TRTLLM_VERSION
        return engine.triton_version

    def release_date(self, version: str) -> ReleaseDate | None:
        from llmdeploy.engines.trtllm.releases import RELEASE_DATES

        return RELEASE_DATES.get(version)

    def sizing_fields(self, spec: Spec) -> dict[str, object]:
        from llmdeploy.engines.trtllm.releases import TRITON_TO_TRTLLM

        engine = _section(spec.engine)
        pytorch = engine.path == "pytorch"
        fields: dict[str, object] = {
            # the TensorRT-LLM of the release image, or the one inside
            # nvcr.io/nvidia/tritonserver:<triton>-trtllm-python-py3
            "engine_version": (
                self.version(engine) if pytorch else TRITON_TO_TRTLLM.get(engine.triton_version)
            ),
            "engine_variant": engine.path,
            "kv_cache_free_gpu_mem_fraction": engine.kv_cache_free_gpu_mem_fraction,
            "max_num_seqs": engine.max_batch_size,
        }
        if pytorch:  # the checkpoint is loaded as stored: a quantization needs such a repo
            fields["runtime_quantizations"] = frozenset()
        return fields

    def memory_budget(
        self,
        req: SizingRequest,
        arch: Architecture,
        quant: CheckpointQuant | None,
        total_gib: float,
        max_model_len: int,
    ) -> MemoryBudget:
        from llmdeploy.engines.trtllm.budget import trtllm_budget

        return trtllm_budget(req, arch, quant, total_gib, max_model_len)

    def pipeline_split(self, version: str | None, num_layers: int, pp: int) -> None:
        return None  # one pod, tensor parallelism only (checks.py refuses pipeline parallelism)

    def decide_batching(self, spec: Spec, sizing: Sizing) -> tuple[Spec, str | None]:
        from llmdeploy.sizing.batching import kv_sequences, sequences_limit

        engine = _section(spec.engine)
        if "max_batch_size" in engine.model_fields_set or not sizing.fits:
            return spec, None
        # guaranteed_no_evict reserves prompt + output per request: the cache holds this many
        n = sequences_limit(sizing, floor=8, cap=self.max_sequences_cap)
        why = (
            f"engine.maxBatchSize {n}: the KV cache holds {kv_sequences(sizing)} sequences of "
            f"{sizing.request.slo_input_tokens}+{sizing.request.slo_output_tokens} tokens "
            f"(at most {self.max_sequences_cap})"
        )
        return spec.model_copy(
            update={"engine": engine.model_copy(update={"max_batch_size": n})}
        ), why

    def engine_run(self, sizing: Sizing, spec: Spec | None) -> EngineRun:
        from llmdeploy.engines.trtllm.perf import engine_run

        return engine_run(sizing, spec)

    def plan(
        self, spec: Spec, instance: Instance, sizing: Sizing, header_command: str
    ) -> EngineParts:
        if _section(spec.engine).path == "pytorch":
            from llmdeploy.engines.trtllm.pytorch import plan_trtllm_serve

            return plan_trtllm_serve(spec, instance, sizing)
        from llmdeploy.engines.trtllm.plan import plan_triton

        return plan_triton(spec, instance, sizing, header_command)


ENGINE = Trtllm()

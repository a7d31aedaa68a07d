"""Triton + TensorRT-LLM behind the engine interface (:class:`llmdeploy.engines.base.Engine`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from llmdeploy.engines.base import Ignored

if TYPE_CHECKING:
    from llmdeploy.catalog.architecture import Architecture, CheckpointQuant
    from llmdeploy.catalog.ec2 import Instance
    from llmdeploy.errors import Diagnostic
    from llmdeploy.plan.assemble import EngineParts
    from llmdeploy.sizing.types import MemoryBudget, Sizing, SizingRequest
    from llmdeploy.spec.fields import EngineSection
    from llmdeploy.spec.sections import Spec


class Trtllm:
    name = "trtllm"
    version_field = "engine.tritonVersion"
    # The engine build quantizes a 16-bit checkpoint (quantize.py / convert_checkpoint.py).
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
            "the engine is built for engine.maxBatchSize sequences (trtllm-build --max_batch_size)",
            "set engine.maxBatchSize instead",
        ),
        "model.servedName": Ignored(
            "warning",
            "Triton serves the model under its model-repository names (`ensemble`)",
            "remove it, or use engine.type vllm for an OpenAI-compatible name",
        ),
    }

    def check(self, spec: Spec, hardware: Sequence[Instance]) -> list[Diagnostic]:
        from llmdeploy.engines.trtllm.checks import problems

        return problems(spec, hardware)

    def version(self, section: EngineSection) -> str:
        from llmdeploy.engines.trtllm.spec import TrtllmEngine

        assert isinstance(section, TrtllmEngine)
        return section.triton_version

    def sizing_fields(self, spec: Spec) -> dict[str, object]:
        from llmdeploy.engines.trtllm.flags import TRITON_TO_TRTLLM
        from llmdeploy.engines.trtllm.spec import TrtllmEngine

        engine = spec.engine
        assert isinstance(engine, TrtllmEngine)
        return {
            # the TensorRT-LLM inside nvcr.io/nvidia/tritonserver:<triton>-trtllm-python-py3
            "engine_version": TRITON_TO_TRTLLM.get(engine.triton_version),
            "kv_cache_free_gpu_mem_fraction": engine.kv_cache_free_gpu_mem_fraction,
            "max_num_seqs": engine.max_batch_size,
        }

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

    def plan(
        self, spec: Spec, instance: Instance, sizing: Sizing, header_command: str
    ) -> EngineParts:
        from llmdeploy.engines.trtllm.plan import plan_triton
        from llmdeploy.plan.pod import checkpoint_gib

        return plan_triton(spec, instance, checkpoint_gib(spec, sizing), header_command)


ENGINE = Trtllm()

"""vLLM behind the engine interface (:class:`llmdeploy.engines.base.Engine`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from llmdeploy.catalog.architecture import Architecture, CheckpointQuant
    from llmdeploy.catalog.ec2 import Instance
    from llmdeploy.engines.base import Ignored, ReleaseDate
    from llmdeploy.errors import Diagnostic
    from llmdeploy.perf.constants import EngineRun
    from llmdeploy.plan.types import EngineParts
    from llmdeploy.sizing.types import MemoryBudget, Sizing, SizingRequest
    from llmdeploy.spec.fields import EngineSection
    from llmdeploy.spec.sections import Spec


# The most sequences llmdeploy lets one vLLM replica schedule when it decides the limit: vLLM's
# own default on GPUs of 70 GiB and more (vllm/engine/arg_utils.py, _set_default_args)
MAX_NUM_SEQS_CAP = 1024


class Vllm:
    max_sequences_cap = MAX_NUM_SEQS_CAP
    name = "vllm"
    version_field = "engine.version"
    # `--quantization fp8` quantizes a 16-bit checkpoint's Linear layers at load; AWQ, GPTQ and
    # INT8 need a checkpoint quantized that way (vllm/config/model.py@v0.19.0,
    # ModelConfig._verify_quantization reads the method from its quantization_config).
    runtime_quantizations = frozenset({"fp8"})
    ignored_fields: ClassVar[Mapping[str, Ignored]] = {}  # every shared field applies

    def check(self, spec: Spec, hardware: Sequence[Instance]) -> list[Diagnostic]:
        from llmdeploy.engines.vllm.checks import problems

        return problems(spec, hardware)

    def version(self, section: EngineSection) -> str:
        from llmdeploy.engines.vllm.spec import VllmEngine

        assert isinstance(section, VllmEngine)
        return section.version

    def release_date(self, version: str) -> ReleaseDate | None:
        from llmdeploy.engines.vllm.releases import RELEASE_DATES

        return RELEASE_DATES.get(version)

    def sizing_fields(self, spec: Spec) -> dict[str, object]:
        from llmdeploy.engines.vllm.spec import VllmEngine

        engine = spec.engine
        assert isinstance(engine, VllmEngine)
        return {
            "engine_version": engine.version,
            "enforce_eager": engine.enforce_eager,
            "max_num_seqs": spec.serving.max_num_seqs,
        }

    def memory_budget(
        self,
        req: SizingRequest,
        arch: Architecture,
        quant: CheckpointQuant | None,
        total_gib: float,
        max_model_len: int,
    ) -> MemoryBudget:
        from llmdeploy.engines.vllm.budget import vllm_budget
        from llmdeploy.engines.vllm.flags import DEFAULT_VLLM_VERSION, command_for

        # a release llmdeploy never checked is refused here too, for quick mode's
        # --engine-version (a spec's is refused before sizing, at its line)
        command_for(req.engine_version or DEFAULT_VLLM_VERSION)
        return vllm_budget(req, arch, quant, total_gib, max_model_len)

    def pipeline_split(self, version: str | None, num_layers: int, pp: int) -> tuple[int, ...]:
        from llmdeploy.engines.vllm.flags import DEFAULT_VLLM_VERSION
        from llmdeploy.engines.vllm.pipeline import stage_layers

        return stage_layers(version or DEFAULT_VLLM_VERSION, num_layers, pp)

    def decide_batching(self, spec: Spec, sizing: Sizing) -> tuple[Spec, str | None]:
        from llmdeploy.sizing.batching import kv_sequences, raised_limit

        if spec.serving.max_num_seqs is not None or not sizing.fits:
            return spec, None
        # vLLM admits a request when its prompt fits and preempts (recomputes) the newest one
        # when decode growth overflows the cache, so a default above what the cache holds
        # costs nothing; one below it (256 on GPUs under 70 GiB) leaves the rest unusable and
        # is raised to what the cache holds at the SLO's lengths
        n = raised_limit(sizing, cap=self.max_sequences_cap)
        if n is None:
            return spec, None
        serving = spec.serving.model_copy(update={"max_num_seqs": n})
        why = (
            f"serving.maxNumSeqs {n}: the KV cache holds {kv_sequences(sizing)} sequences of "
            f"{sizing.request.slo_input_tokens}+{sizing.request.slo_output_tokens} tokens "
            f"(at most {self.max_sequences_cap})"
        )
        return spec.model_copy(update={"serving": serving}), why

    def engine_run(self, sizing: Sizing, spec: Spec | None) -> EngineRun:
        from llmdeploy.engines.vllm.perf import engine_run

        extra = getattr(spec.engine, "extra_args", ()) if spec is not None else ()
        return engine_run(sizing, tuple(extra or ()))

    def plan(
        self, spec: Spec, instance: Instance, sizing: Sizing, header_command: str
    ) -> EngineParts:
        from llmdeploy.engines.vllm.plan import plan_vllm

        return plan_vllm(spec, instance, sizing)


ENGINE = Vllm()

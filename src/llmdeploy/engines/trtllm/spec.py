"""The ``engine:`` section for TensorRT-LLM (``type: trtllm``): the pinned engine-build path or the
PyTorch-backend path (docs/trtllm.md says which to choose)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from llmdeploy import versions
from llmdeploy.engines.trtllm.releases import (
    DEFAULT_TRTLLM_VERSION,
    PYTORCH_SINCE,
    PYTORCH_UNTIL,
    in_range,
)
from llmdeploy.spec.fields import (
    S3_ACCESS_HINT,
    EngineSection,
    ServerPassthrough,
    SpecModel,
    check_no_credentials,
    fresh,
)

# Newest Triton `-trtllm-python-py3` release whose TensorRT-LLM (1.2.1) still ships
# `trtllm-build` (shared/reference/trtllm.md §1, §2.3).
DEFAULT_TRITON_VERSION = "26.07"

Backend = Literal["engine", "pytorch"]
# Fields that only mean something on the engine path; set on the PyTorch path they are an error
# at their line, never ignored (engines/trtllm/checks.py).
ENGINE_ONLY = (
    "triton_version",
    "artifacts_s3_uri",
    "max_input_len",
    "decoupled",
    "batch_scheduler_policy",
    "build_job",
)
# ... and the fields of backend pytorch only (its trtllm-serve container)
PYTORCH_ONLY = ("extra_args", "env")


class BuildJob(SpecModel):
    """The engine build as a Kubernetes Job (backend engine): build-engine.sh on a node of the
    serving NodePool, uploading to artifactsS3Uri. Its name carries a hash of the build inputs,
    so an unchanged spec never starts a second build (docs/trtllm.md)."""

    enabled: bool = Field(
        True, description="Render the Job (job.yaml). false: run build-engine.sh yourself."
    )
    iam_role_arn: str | None = Field(
        None,
        description=(
            "IRSA role for the build's own ServiceAccount, allowed to write artifactsS3Uri. "
            "null: the Job uses the serving ServiceAccount, whose role then needs write access."
        ),
        pattern=r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]+$",
    )
    backoff_limit: int = Field(
        2, ge=0, le=10, description="Retries after a failed build (evictions do not count)."
    )
    active_deadline_seconds: int = Field(
        21600, ge=600, le=604_800, description="Deadline for download, calibration and build."
    )
    ttl_seconds_after_finished: int | None = Field(
        None,
        ge=0,
        le=31_536_000,
        description=(
            "Delete the finished Job after this many seconds. null: keep it, so GitOps "
            "controllers and re-applies see it in sync instead of re-creating it."
        ),
    )


class TrtllmEngine(EngineSection, ServerPassthrough):
    type: Literal["trtllm"] = "trtllm"
    backend: Backend | None = Field(
        None,
        description=(
            "engine: trtllm-build engines served by Triton's tensorrtllm backend (pinned, legacy: "
            "Triton 26.03-26.07, TensorRT-LLM 1.2.x). pytorch: no engine build; the checkpoint "
            "is loaded by TensorRT-LLM's PyTorch backend and served by trtllm-serve. Default: "
            "pytorch when `version` is set, engine otherwise."
        ),
    )
    version: str | None = Field(
        None,
        description=(
            "TensorRT-LLM release of nvcr.io/nvidia/tensorrt-llm/release:<v> (backend pytorch; "
            "default 1.2.1)."
        ),
        pattern=r"^\d+\.\d+\.\d+(rc\d+)?(\.post\d+)?$",
    )
    triton_version: str = Field(
        DEFAULT_TRITON_VERSION,
        description=(
            "Triton release (YY.MM) of nvcr.io/nvidia/tritonserver:<v>-trtllm-python-py3 "
            "(backend engine); the TensorRT-LLM version follows from it, and build and serving "
            "images always match."
        ),
        pattern=r"^\d{2}\.\d{2}$",
    )
    artifacts_s3_uri: str | None = Field(
        None,
        description=(
            "s3://bucket/prefix where the build uploads engine + tokenizer (backend engine, "
            "required there)."
        ),
        pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?$",
    )
    max_batch_size: int = Field(
        64,
        ge=1,
        le=4096,
        description=(
            "trtllm-build or trtllm-serve --max_batch_size. Left out: decided from the sized "
            "KV cache (the sequences of the SLO's lengths it holds, rounded up to 8, at most "
            "2048); 64 is only the provisional value the first sizing pass uses."
        ),
    )
    max_input_len: int | None = Field(
        None,
        ge=1,
        le=10_485_760,
        description="trtllm-build --max_input_len (backend engine); defaults to maxModelLen.",
    )
    kv_cache_free_gpu_mem_fraction: float = Field(
        0.9,
        gt=0,
        le=1,
        description=(
            "KV-cache share of the memory left free: after the engine loads (engine), after the "
            "profiled peak of weights, a max_num_tokens batch and CUDA graphs (pytorch)."
        ),
    )
    decoupled: bool = Field(
        True, description="Decoupled (streaming) mode for tensorrt_llm (backend engine)."
    )
    batch_scheduler_policy: Literal["guaranteed_no_evict", "max_utilization"] = Field(
        "guaranteed_no_evict", description="Triton tensorrt_llm batch_scheduler_policy (engine)."
    )
    build_job: BuildJob = Field(default_factory=fresh(BuildJob))

    @field_validator("version")
    @classmethod
    def _verified(cls, v: str | None) -> str | None:
        if v is not None and not in_range(v, PYTORCH_SINCE, PYTORCH_UNTIL):
            raise ValueError(
                f"TensorRT-LLM {v}: the PyTorch path is verified for "
                f"{versions.span(PYTORCH_SINCE, PYTORCH_UNTIL)} only (trtllm-serve flags, LLM "
                "API keys and Prometheus metric names; 1.3 renames every metric); use "
                f"{DEFAULT_TRTLLM_VERSION}"
            )
        return v

    @property
    def path(self) -> Backend:
        """The backend in effect: explicit, else pytorch when a TensorRT-LLM release is pinned."""
        if self.backend is not None:
            return self.backend
        return "pytorch" if self.version is not None else "engine"

    @field_validator("artifacts_s3_uri")
    @classmethod
    def _s3(cls, v: str | None) -> str | None:
        return None if v is None else check_no_credentials(v, "the S3 URI", S3_ACCESS_HINT)


SECTION = TrtllmEngine

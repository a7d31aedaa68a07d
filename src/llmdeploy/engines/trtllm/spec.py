"""The ``engine:`` section for Triton + TensorRT-LLM (``type: trtllm``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from llmdeploy.spec.fields import S3_ACCESS_HINT, EngineSection, check_no_credentials

# Newest Triton `-trtllm-python-py3` release whose TensorRT-LLM (1.2.1) still ships
# `trtllm-build` (shared/reference/trtllm.md §1, §2.3).
DEFAULT_TRITON_VERSION = "26.07"


class TrtllmEngine(EngineSection):
    type: Literal["trtllm"] = "trtllm"
    triton_version: str = Field(
        DEFAULT_TRITON_VERSION,
        description=(
            "Triton release (YY.MM) of nvcr.io/nvidia/tritonserver:<v>-trtllm-python-py3; the "
            "TensorRT-LLM version follows from it, and build and serving images always match."
        ),
        pattern=r"^\d{2}\.\d{2}$",
    )
    artifacts_s3_uri: str = Field(
        ...,
        description="s3://bucket/prefix where the build script uploads engine + tokenizer.",
        pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?$",
    )
    max_batch_size: int = Field(64, ge=1, le=4096, description="trtllm-build --max_batch_size.")
    max_input_len: int | None = Field(
        None,
        ge=1,
        le=10_485_760,
        description="trtllm-build --max_input_len; defaults to maxModelLen.",
    )
    kv_cache_free_gpu_mem_fraction: float = Field(
        0.9, gt=0, le=1, description="Fraction of memory free after load given to the KV cache."
    )
    decoupled: bool = Field(True, description="Decoupled (streaming) mode for tensorrt_llm.")
    batch_scheduler_policy: Literal["guaranteed_no_evict", "max_utilization"] = (
        "guaranteed_no_evict"
    )

    @field_validator("artifacts_s3_uri")
    @classmethod
    def _s3(cls, v: str) -> str:
        return check_no_credentials(v, "the S3 URI", S3_ACCESS_HINT)


SECTION = TrtllmEngine

"""The ``engine:`` section for vLLM (``type: vllm``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from llmdeploy.engines.vllm.flags import DEFAULT_VLLM_VERSION
from llmdeploy.spec.fields import (
    EngineSection,
    ServerPassthrough,
    SpecModel,
    check_pinned_image,
    check_release,
)


class ApiKeySecret(SpecModel):
    name: str = Field(..., description="Secret name.", min_length=1, max_length=253)
    key: str = Field("api-key", description="Key inside the Secret.", min_length=1, max_length=253)


class VllmEngine(EngineSection, ServerPassthrough):
    type: Literal["vllm"] = "vllm"
    version: str = Field(
        DEFAULT_VLLM_VERSION,
        description="vLLM release (`v0.19.0` is `0.19.0`); flags are rendered for this version.",
    )
    image: str | None = Field(
        None,
        description=(
            "Override the image (must be pinned by tag or digest; `latest` is refused). "
            "Defaults to vllm/vllm-openai:v<version>."
        ),
    )
    enforce_eager: bool = Field(False, description="Disable CUDA graphs (saves memory, slower).")
    api_key_secret: ApiKeySecret | None = Field(
        None,
        description=(
            "Secret holding an API key clients must send (`Authorization: Bearer <key>`), "
            "given to vLLM as VLLM_API_KEY from the Secret (never the value). vLLM checks it "
            "only on /v1 (and newer API) paths: /health and /metrics stay open, so probes and "
            "Prometheus need no key, and the NetworkPolicy remains the real boundary."
        ),
    )
    distributed_executor_backend: Literal["auto", "mp", "ray"] = Field(
        "auto",
        description=(
            "How the pods of a multi-node replica form one server: mp (--nnodes/--node-rank/"
            "--master-addr, workers --headless) or ray (a Ray cluster across the pods). auto: "
            "mp from the first release that has --nnodes (0.11.1), ray before it."
        ),
    )

    @field_validator("image")
    @classmethod
    def _pinned(cls, v: str | None) -> str | None:
        return check_pinned_image(v)

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        return check_release(v)


SECTION = VllmEngine

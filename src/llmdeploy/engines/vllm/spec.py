"""The ``engine:`` section for vLLM (``type: vllm``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from llmdeploy.spec.fields import EngineSection, check_pinned_image, check_release

DEFAULT_VLLM_VERSION = "0.19.0"


class VllmEngine(EngineSection):
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

    @field_validator("image")
    @classmethod
    def _pinned(cls, v: str | None) -> str | None:
        return check_pinned_image(v)

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        return check_release(v)


SECTION = VllmEngine

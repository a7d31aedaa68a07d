"""What the checkpoint a spec serves *is*: its geometry and how it stores its weights.

``model.architecture`` gives the geometry (a catalog name or the checkpoint's own config.json);
``model.id`` names what the server downloads. When the id is a published pre-quantized repo the
catalog knows (``RedHatAI/...-FP8-dynamic``, ``Qwen/Qwen2.5-72B-Instruct-AWQ``), that repo's
record wins over a 16-bit base architecture: it carries the repo's ``quantization_config`` and
its own geometry (padded widths).

Then the spec's ``quantization`` must agree with it. vLLM reads the method from the checkpoint's
``quantization_config`` and refuses a ``--quantization`` that differs ("Quantization method
specified in the model config (...) does not match ...", ``ModelConfig._verify_quantization``,
vllm/config/model.py@v0.19.0); it quantizes a 16-bit checkpoint only to FP8 at load. A
contradiction is a located spec error here, before anything is rendered; what cannot be known
(a repo the catalog does not list) is reported as an assumption.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llmdeploy.catalog import models
from llmdeploy.catalog.architecture import Architecture, CheckpointQuant
from llmdeploy.errors import Notice, SpecFieldError
from llmdeploy.sizing import memory as mem

if TYPE_CHECKING:
    from llmdeploy.spec.sections import Spec

# Words in a repo name that usually mean the weights are stored quantized.
_QUANTIZED_NAME = re.compile(
    r"(^|[-_./])(fp8|awq|gptq|int4|int8|w4a16|w8a8|w8a16|nvfp4|mxfp4)", re.I
)


@dataclass(frozen=True)
class Checkpoint:
    architecture: Architecture  # geometry, with ``quantization`` = how the weights are stored
    notices: tuple[Notice, ...] = ()


def resolve(spec: Spec, spec_dir: Path | None, runtime: frozenset[str]) -> Checkpoint:
    """The checkpoint ``spec`` serves; ``runtime`` is what the engine quantizes by itself
    (:attr:`llmdeploy.engines.base.Engine.runtime_quantizations`)."""
    ref, model_id = spec.model.architecture, spec.model.id
    arch = models.load_architecture(ref, spec_dir)
    repo = models.quantized_checkpoint(model_id)
    if repo is not None and repo.hf_id != arch.hf_id:
        arch = _published_repo(arch, repo, ref, model_id)
    notices = _agree(spec, arch, runtime)
    typo = models.misspelt_repo(model_id, arch.name)
    if typo is not None:
        notices += (
            Notice(
                "model.id",
                f"model.id {model_id} is not a repo the catalog knows (did you mean {typo!r}?): "
                "the server downloads exactly this id",
                severity="warning",
                hint=f"set model.id: {typo}",
            ),
        )
    return Checkpoint(arch, notices)


def _published_repo(
    arch: Architecture, repo: Architecture, ref: str, model_id: str
) -> Architecture:
    q = repo.quantization
    assert q is not None
    if models.is_catalog_ref(ref) and arch.quantization is None and arch.name == repo.name:
        return repo  # the base architecture of the repo: take the repo's own record
    raise SpecFieldError(
        "model.architecture",
        f"model.id {model_id} is a published {q.label} checkpoint of {repo.name}, but "
        f"model.architecture {ref!r} describes "
        + (
            f"a {arch.quantization.label} {arch.name}"
            if arch.quantization
            else f"16-bit {arch.name}"
        ),
        hint=f"set model.architecture to {model_id} (or to that repo's config.json)",
    )


def _agree(spec: Spec, arch: Architecture, runtime: frozenset[str]) -> tuple[Notice, ...]:
    requested, ckpt, model_id = spec.quantization, arch.quantization, spec.model.id
    engine = spec.engine.type
    if ckpt is not None:
        _, problem = mem.effective_quant(arch, requested)
        if problem:
            raise SpecFieldError(
                "quantization",
                f"model.id {model_id} is stored as {_stored(ckpt)}: quantization {requested!r} "
                "contradicts it (vLLM refuses a --quantization that differs from the "
                "checkpoint's quantization_config)",
                hint=f"set quantization: none to serve it as stored, or {_spec_value(ckpt)}",
            )
        return ()
    if requested == "none":
        return ()
    # The architecture says 16-bit. Known for certain when model.id is a catalog repo or the
    # architecture is the checkpoint's own config.json (it has no quantization_config).
    certain = (
        models.known_repo(model_id) is not None
        or not models.is_catalog_ref(spec.model.architecture)
        or model_id.lower() == arch.hf_id.lower()
    )
    if requested in runtime:
        return () if certain else _unknown_repo_runtime(model_id, requested, engine)
    if certain:
        method = mem.REQUESTED_QUANT[requested].method
        repos = models.quantized_repos(arch.name, method)
        raise SpecFieldError(
            "quantization",
            f"{engine} cannot quantize a 16-bit checkpoint to {requested} at start, and model.id "
            f"{model_id} is a 16-bit {arch.name} checkpoint",
            hint=(
                f"serve a checkpoint stored as {requested}: set model.id to "
                + (" or ".join(repos) if repos else f"a pre-quantized {requested} repo")
                + (" or use quantization: " + " or ".join(sorted(runtime)) if runtime else "")
            ),
        )
    return (
        Notice(
            "model.id",
            f"model.id {model_id} is not in the catalog: taken as a checkpoint stored as "
            f"{requested} (the server reads its quantization_config), sized on the geometry of "
            f"{arch.name}",
            severity="note",
            hint="set model.architecture to the repo's config.json to size it from its own file",
        ),
    )


def _unknown_repo_runtime(model_id: str, requested: str, engine: str) -> tuple[Notice, ...]:
    looks_quantized = bool(_QUANTIZED_NAME.search(model_id.rsplit("/", 1)[-1]))
    message = (
        f"model.id {model_id} is not in the catalog: taken as a 16-bit checkpoint that {engine} "
        f"quantizes to {requested} at start"
    )
    if looks_quantized:
        message += "; its name says it may already be quantized, and then vLLM refuses the flag"
    return (
        Notice(
            "model.id",
            message,
            severity="warning" if looks_quantized else "note",
            hint="if it is pre-quantized, set model.architecture to its config.json",
        ),
    )


def _stored(q: CheckpointQuant) -> str:
    return f"{q.label} (quant_method {q.quant_method})" if q.quant_method else q.label


def _spec_value(q: CheckpointQuant) -> str:
    for value, methods in mem.CHECKPOINT_MATCH.items():
        if q.method in methods:
            return f"quantization: {value}"
    return "quantization: none"

"""What vLLM cannot serve as the spec asks, known before sizing: the engine's ``check``.

``llmdeploy size`` and ``render`` both run it (:mod:`llmdeploy.spec.checks`), so a version or a
flag the pinned release does not accept is an error of ``size`` too, not only of ``render``.
"""

from __future__ import annotations

from llmdeploy.engines.vllm.budget import vllm_facts
from llmdeploy.engines.vllm.options import server_args
from llmdeploy.engines.vllm.spec import VllmEngine
from llmdeploy.errors import Diagnostic, UnsupportedFlagError, UnsupportedVersionError
from llmdeploy.spec.sections import Spec


def problems(spec: Spec) -> list[Diagnostic]:
    engine = spec.engine
    assert isinstance(engine, VllmEngine)
    out: list[Diagnostic] = []
    # every flag the plan renders, against the pinned release's parser (`--quantization fp8`
    # whenever the spec asks for FP8: the plan passes it for a 16-bit checkpoint)
    quantization = "fp8" if spec.quantization == "fp8" else None
    try:
        server_args(spec, quantization)
    except (UnsupportedFlagError, UnsupportedVersionError) as exc:
        out.append(Diagnostic(f"`engine.version`: {exc.message}", field="engine.version"))
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

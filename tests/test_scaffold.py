"""`llmdeploy init`: the starter spec loads, documents every optional section with the real
defaults, and uncommenting those blocks changes nothing."""

from __future__ import annotations

import pytest

from llmdeploy import pipeline
from llmdeploy.spec.load import load_spec_text
from llmdeploy.spec.starter import starter_spec


def _uncomment(text: str) -> str:
    marker = "# Optional sections this preset leaves at their defaults:\n"
    head, _, tail = text.partition(marker)
    lines = [
        line[2:] if line.startswith("# ") and not line.startswith("# ---") else line
        for line in tail.splitlines()
        if line != "#"
    ]
    return head + "\n".join(lines) + "\n"


@pytest.mark.parametrize("preset", pipeline.preset_names())
def test_starter_spec_loads_and_its_defaults_are_the_real_ones(preset: str) -> None:
    path = pipeline.preset_path(preset)
    assert path is not None
    text = starter_spec(path.read_text(encoding="utf-8"), preset)
    assert text.startswith("# yaml-language-server: $schema=")
    spec = load_spec_text(text, "spec.yaml").spec
    assert spec == load_spec_text(path.read_text(encoding="utf-8"), "p").spec
    uncommented = _uncomment(text)
    assert uncommented != text
    assert load_spec_text(uncommented, "spec.yaml").spec == spec


def test_a_preset_that_omits_startup_documents_it() -> None:
    path = pipeline.preset_path("llama3-8b-vllm-g5")
    assert path is not None
    text = starter_spec(path.read_text(encoding="utf-8"), "llama3-8b-vllm-g5")
    assert "# startup:\n#   downloadGbps: 2.0\n" in text

"""Specs and rendering shared by the node-side tests (test_amis.py, test_capacity.py)."""

from __future__ import annotations

from typing import Any

import pytest

from llmdeploy import pipeline
from llmdeploy.errors import Diagnostic, SpecError
from llmdeploy.spec import load

BASE = """\
apiVersion: llmdeploy.dev/v1alpha1
name: demo
model:
  id: meta-llama/Llama-3.1-8B-Instruct
  architecture: llama-3.1-8b
hardware:
  {hardware}
  tensorParallel: {tp}
autoscaling:
  minReplicas: {replicas}
cluster:
  name: demo-eks
{version}  nodeRole: KarpenterNodeRole-demo
"""


def spec_text(
    hardware: str = "instanceFamily: g5",
    tp: int = 1,
    replicas: int = 2,
    cluster: str = "",
    version: str | None = "1.35",
) -> str:
    """A small spec; ``cluster`` lines are appended to its `cluster` section (line 14 on,
    or 15 on with the default ``version``)."""
    line = f'  kubernetesVersion: "{version}"\n' if version else ""
    return BASE.format(hardware=hardware, tp=tp, replicas=replicas, version=line) + cluster


def render(text: str, crds: object = None) -> pipeline.Rendered:
    loaded = load.load_spec_text(text, "spec.yaml")
    return pipeline.render_loaded(loaded, header_command="test", crds=crds, force=True)  # type: ignore[arg-type]


def refused(text: str) -> list[Diagnostic]:
    with pytest.raises(SpecError) as info:
        render(text)
    return list(info.value.diagnostics)


def warnings(result: pipeline.Rendered) -> list[Diagnostic]:
    """The render's warnings, located in the spec as the CLI prints them."""
    return [d for d in result.warnings if d.severity == "warning"]


def docs(result: pipeline.Rendered, kind: str) -> list[dict[str, Any]]:
    return [d for _, d in pipeline.yaml_documents(result.files) if d["kind"] == kind]

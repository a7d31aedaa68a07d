"""llmdeploy: one YAML spec to validated LLM-serving manifests for Amazon EKS."""

from __future__ import annotations

__version__ = "0.1.0"

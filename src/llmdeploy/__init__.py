"""llmdeploy: one YAML spec to validated LLM-serving manifests for Amazon EKS."""

from __future__ import annotations

__version__ = "0.1.0"

# before the package's first dataclass: their methods come compiled (docs/performance.md)
from llmdeploy import dataclass_code as _dataclass_code

_dataclass_code.install()

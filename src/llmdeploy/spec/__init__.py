"""The spec stage: the spec format (frozen pydantic models), loading YAML with positions, the
starter spec of `llmdeploy init`."""

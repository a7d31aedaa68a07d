"""vLLM (OpenAI-compatible server)."""

"""The check stage: validate rendered (or given) manifests offline with real validators."""

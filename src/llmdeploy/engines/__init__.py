"""Serving engines as plug-ins: one folder each, one interface, one registry."""

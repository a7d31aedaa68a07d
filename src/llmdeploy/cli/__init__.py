"""Command line (:mod:`llmdeploy.cli.commands`). The only package that prints or exits."""

from llmdeploy.cli.commands import main

__all__ = ["main"]

"""Release versions: the one parser behind every table keyed on an engine's version.

``parse`` turns a release string into ``(major, minor, patch)``, the key the flag tables
(``engines/vllm/flags.py``, ``engines/trtllm/flags.py``) and the memory budgets
(``engines/*/budget.py``) compare. A leading ``v``, as in image tags, names the same release
(``v0.19.0`` is ``0.19.0``); a missing patch is 0 (``0.19`` is ``0.19.0``). A fourth
component, a post-release, a pre-release or a local tag is dropped: ``0.8.5.post1`` counts as
``0.8.5``, ``0.10.1.1`` as ``0.10.1``, ``0.20.0rc1`` as ``0.20.0`` and ``0.19.0+cu128`` as
``0.19.0``, which is how the vLLM flag table was established (each post-release and release
candidate checked against its base release's parser).
"""

from __future__ import annotations

import re
from typing import Final

from llmdeploy.errors import UnsupportedVersionError

Version = tuple[int, int, int]

_RELEASE: Final = re.compile(
    r"v?(?P<major>\d+)\.(?P<minor>\d+)(?:\.(?P<patch>\d+))?(?:\.\d+)*"  # release numbers
    r"(?:[.-]?(?:post|rc|a|b|dev)\d*)*"  # post-, pre- and dev releases (PEP 440 spellings)
    r"(?:\+[0-9A-Za-z.]+)?"  # local tag, e.g. +cu128
)


def parse(version: str, what: str = "release") -> Version:
    """``(major, minor, patch)`` of a release string; UnsupportedVersionError when it is not one
    (``what`` names the kind of version in the message, e.g. ``vLLM``)."""
    found = _RELEASE.fullmatch(version.strip())
    if found is None:
        raise UnsupportedVersionError(
            f"not a {what} version: {version!r} (expected e.g. 0.19.0 or 0.8.5.post1)"
        )
    return int(found["major"]), int(found["minor"]), int(found["patch"] or 0)


def canonical(version: str) -> str:
    """The release string without a leading ``v`` (``v0.19.0`` -> ``0.19.0``), after checking
    that it parses: the spelling image tags and labels are built from."""
    parse(version)
    text = version.strip()
    return text[1:] if text.startswith("v") else text


def span(since: str, until: str) -> str:
    """A half-open release range ``[since, until)`` said as it is: ``1.2.0`` to ``1.3.0`` is
    "1.2.x (1.2.0 or later, before 1.3.0)", never "up to 1.3.0", which would include it."""
    lo, hi = parse(since), parse(until)
    line = ""
    if hi[2] == lo[2] == 0 and lo[0] == hi[0] and lo[1] + 1 == hi[1]:
        line = f"{lo[0]}.{lo[1]}.x "
    elif hi[1] == 0 and hi[2] == 0 and lo[0] + 1 == hi[0] and lo[1:] == (0, 0):
        line = f"{lo[0]}.x "
    return f"{line}({since} or later, before {until})"

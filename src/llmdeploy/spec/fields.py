"""Building blocks of the spec shared by every section, including the engines' own sections
(``engines/<name>/spec.py``): the frozen model base, and validators for names, labels, versions,
images and command-line words."""

from __future__ import annotations

import re
import unicodedata

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
INSTANCE_FAMILY = re.compile(r"^[a-z][a-z0-9-]*$")
VERSION = re.compile(r"^\d+\.\d+(\.\d+)?([.-]?(post|rc)\d+)?$")
DURATION = re.compile(r"^(([0-9]+(s|m|h))+|Never)$")
IMAGE = re.compile(
    r"^(?P<name>[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*)"
    r"(:(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(@sha256:(?P<digest>[0-9a-f]{64}))?$"
)

_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


def check_dns_label(v: str) -> str:
    if len(v) > 63 or not DNS1123_LABEL.fullmatch(v):
        raise ValueError(
            f"{v!r} is not a DNS-1123 label (at most 63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit)"
        )
    return v


def check_label_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        raise ValueError(f"label key {key!r}: prefix {prefix!r} is not a DNS-1123 subdomain")
    if len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        raise ValueError(
            f"label key {key!r}: name must be 1-63 characters of [A-Za-z0-9-_.], starting and "
            "ending alphanumeric"
        )


def check_label_value(key: str, value: str) -> None:
    if value and (len(value) > 63 or not _LABEL_NAME.fullmatch(value)):
        raise ValueError(
            f"label {key!r}: value {value!r} must be at most 63 characters of [A-Za-z0-9-_.], "
            "starting and ending alphanumeric (or empty)"
        )


def check_cli_word(v: str | None, what: str) -> str | None:
    """A value passed to an engine command line as one word: not empty, no leading '-', no
    control characters (it would read as an option or break the process arguments)."""
    if v is None:
        return v
    if not v.strip():
        raise ValueError(f"{what} must not be empty")
    if v.startswith("-"):
        raise ValueError(f"{what} {v!r} must not start with '-' (it would read as an option)")
    if any(unicodedata.category(ch) in {"Cc", "Cs", "Zl", "Zp"} for ch in v):
        raise ValueError(f"{what} {v!r} contains control or line-break characters")
    return v


class SpecModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=False,
    )


def check_pinned_image(v: str | None) -> str | None:
    """An image reference pinned by tag or digest, never ``latest``."""
    if v is None:
        return v
    m = IMAGE.fullmatch(v)
    if m is None:
        raise ValueError(f"not an image reference: {v!r}")
    if m.group("digest") is None and m.group("tag") in (None, "latest"):
        raise ValueError(
            f"image {v!r} is not pinned: use a release tag (e.g. :v0.19.0) or a @sha256 "
            "digest, never `latest`"
        )
    return v


class EngineSection(SpecModel):
    """Base of every engine's ``engine:`` section; ``type`` is the discriminator that selects the
    engine in :mod:`llmdeploy.engines.registry`."""

    type: str

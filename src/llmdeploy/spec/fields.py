"""Building blocks of the spec shared by every section, including the engines' own sections
(``engines/<name>/spec.py``): the frozen (strict) model base, and validators for names, labels,
versions, images, command-line words and URLs that must not carry credentials."""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from collections.abc import Callable
from typing import Annotated, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from llmdeploy import versions
from llmdeploy.errors import UnsupportedVersionError

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
INSTANCE_FAMILY = re.compile(r"^[a-z][a-z0-9-]*$")
DURATION = re.compile(r"^(([0-9]+(s|m|h))+|Never)$")
IMAGE = re.compile(
    r"^(?P<name>[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*)"
    r"(:(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(@sha256:(?P<digest>[0-9a-f]{64}))?$"
)

_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


class FieldError(ValueError):
    """A validator's error with a hint, which the loader prints as ``= hint:``. ``secrets`` are
    parts of the value that must not be printed (masked in the quoted source line)."""

    def __init__(self, message: str, hint: str, secrets: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.hint = hint
        self.secrets = secrets


def located_error(
    title: str, loc: tuple[str | int, ...], message: str, value: object
) -> ValidationError:
    """A model validator's error at ``loc`` inside the model ``title`` (a model validator's own
    errors are otherwise reported at the model, not at the field that is wrong)."""
    error = InitErrorDetails(type=PydanticCustomError("value_error", message), loc=loc, input=value)
    return ValidationError.from_exception_data(title, [error])


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


def check_label_value(value: str) -> str:
    if value and (len(value) > 63 or not _LABEL_NAME.fullmatch(value)):
        raise ValueError(
            f"label value {value!r} must be at most 63 characters of [A-Za-z0-9-_.], "
            "starting and ending alphanumeric (or empty)"
        )
    return value


# Labels llmdeploy sets on every object it renders (plan/names.py: the six recommended
# app.kubernetes.io labels). A user label under this prefix would collide with them.
RESERVED_LABEL_PREFIX = "app.kubernetes.io/"


def check_user_label_key(key: str) -> str:
    """A label key the user adds next to llmdeploy's own labels."""
    check_label_key(key)
    if key.startswith(RESERVED_LABEL_PREFIX):
        raise FieldError(
            f"label key {key!r} is reserved: llmdeploy sets the {RESERVED_LABEL_PREFIX}* labels "
            "on every object",
            "use a key of your own, such as `release` or `team`",
        )
    return key


# Labels a user adds to an object: keys (not reserved) and values checked, each error located
# on its own key or value.
UserLabels = dict[
    Annotated[str, AfterValidator(check_user_label_key)],
    Annotated[str, AfterValidator(check_label_value)],
]

# Query parameters that carry a credential (access tokens, API keys, pre-signed S3 URLs).
_SECRET_PARAM = re.compile(
    r"token|secret|passw(or)?d|pwd|api[-_]?key|access[-_]?key|signature|credential|auth"
    r"|^key$|^x-amz-",
    re.IGNORECASE,
)


S3_ACCESS_HINT = (
    "S3 access goes through IRSA (`serviceAccount.iamRoleArn`): the URI names the bucket and "
    "prefix only"
)


def check_no_credentials(url: str, what: str, hint: str) -> str:
    """Refuse a URL that carries a credential (``user:password@``, ``?token=``): it would be
    rendered verbatim into a manifest or script (docs/security.md §2). The error never repeats
    the credential."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, _ = parts.netloc.rpartition("@")
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    named = [name for name, _ in query if _SECRET_PARAM.search(name)]
    secrets = ([userinfo] if at else []) + [v for n, v in query if n in named and v]
    if at:
        raise FieldError(
            f"{what} carries credentials before '@'; they would be rendered in plain text",
            hint,
            tuple(secrets),
        )
    if named:
        raise FieldError(
            f"{what} carries a credential in its query parameter {named[0]!r}; it would be "
            "rendered in plain text",
            hint,
            tuple(secrets),
        )
    return url


def check_labels(v: dict[str, str]) -> dict[str, str]:
    """Every key and value of a label map is one Kubernetes accepts."""
    for key, value in v.items():
        check_label_key(key)
        check_label_value(value)
    return v


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


_T = TypeVar("_T")


def fresh(make: Callable[[], _T]) -> Callable[[], _T]:
    """``make`` (a model class, ``list``, ``dict``) as a field's ``default_factory``, called the
    same way, behind a lambda. Pydantic asks ``inspect.signature`` of every factory whether it
    takes the validated data; for a model class that builds the signature of all its fields,
    for ``list`` it parses a text signature: 0.1-3 ms each, against about 10 us for a lambda.
    The spec's 19 factories (26 such calls, with inherited fields) were 2.5 % of a render's
    instructions (issue 25)."""
    return lambda: make()


class SpecModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        # One typing rule (docs/spec-reference.md): a value has its JSON Schema type exactly;
        # `true` is not 1, "12" is not 12, 0.9 is not a string. Lists are read into tuples.
        strict=True,
        use_attribute_docstrings=False,
    )


def check_release(v: str) -> str:
    """An engine release as ``llmdeploy.versions`` reads it, spelt as it goes into the image tag
    after its ``v``: ``v0.19.0`` is accepted as ``0.19.0``; a local tag (``+cu128``) or
    surrounding blanks cannot be part of a tag and are refused."""
    problem = ValueError(f"not a release version: {v!r} (expected e.g. 0.19.0)")
    if v != v.strip() or "+" in v:
        raise problem
    try:
        return versions.canonical(v)
    except UnsupportedVersionError:
        raise problem from None


def check_words(v: list[str]) -> list[str]:
    """Command-line words as a container's ``args`` gets them (no shell): an empty word or
    one with a NUL or a newline is refused (a newline would end up in a YAML scalar and a
    process argument that nobody reads as typed)."""
    for word in v:
        if word == "" or any(c in word for c in "\0\n\r"):
            raise ValueError(f"not a command-line word: {word!r}")
    return v


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


class ServerPassthrough(SpecModel):
    """``extraArgs`` and ``env`` of an engine section: what its server needs that llmdeploy does
    not own. Each engine checks them against its pinned release (docs/engine-options.md)."""

    extra_args: list[str] = Field(
        default_factory=fresh(list),
        description=(
            "Server arguments llmdeploy does not own, appended to the server's command line as "
            "given (e.g. `--enable-auto-tool-choice`, `--tool-call-parser`, `hermes`). Each "
            "option must be one the pinned release accepts; an option llmdeploy renders itself "
            "is refused with the spec field that sets it (docs/engine-options.md)."
        ),
        max_length=256,
    )
    env: dict[str, str] = Field(
        default_factory=fresh(dict),
        description=(
            "Environment variables for the server container, added to llmdeploy's own (a "
            "variable llmdeploy sets, or a name that holds a credential, is refused)."
        ),
        max_length=256,
    )

    @field_validator("extra_args")
    @classmethod
    def _words(cls, v: list[str]) -> list[str]:
        return check_words(v)


class EngineSection(SpecModel):
    """Base of every engine's ``engine:`` section; ``type`` is the discriminator that selects the
    engine in :mod:`llmdeploy.engines.registry`."""

    type: str

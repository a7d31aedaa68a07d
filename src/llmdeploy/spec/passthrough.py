"""What every engine checks alike in ``engine.extraArgs`` and ``engine.env``: variable names,
variables the plan sets itself, names that hold a credential. Each engine's ``extra.py`` checks
its own options against its own flag table and calls these for the rest."""

from __future__ import annotations

import re
from collections.abc import Mapping

from llmdeploy.errors import Diagnostic

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# names that hold a credential: a value in the spec would be rendered in plain text
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|CREDENTIAL", re.I)
# a negative number is a value, not an option
NUMBER = re.compile(r"-\d+(\.\d*)?([eE][-+]?\d+)?")


def instead(field: str) -> str:
    """The hint for an option or variable that ``field`` decides (a parenthesised reason when
    no spec field does)."""
    if field.startswith("("):
        return f"llmdeploy decides it {field}"
    return f"set `{field}` instead"


def owned_arg(flag: str, field: str, index: int) -> Diagnostic:
    return Diagnostic(
        f"`engine.extraArgs`: llmdeploy already renders {flag}",
        field=f"engine.extraArgs.{index}",
        hint=instead(field),
    )


def env_problems(
    env: Mapping[str, str], reserved: Mapping[str, str], secret_hint: str
) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for name in env:
        where = f"engine.env.{name}"
        if not ENV_NAME.fullmatch(name):
            out.append(Diagnostic(f"`engine.env`: {name!r} is not a variable name", field=where))
        elif name in reserved:
            out.append(
                Diagnostic(
                    f"`engine.env`: llmdeploy already sets {name}",
                    field=where,
                    hint=instead(reserved[name]),
                )
            )
        elif SECRET_NAME.search(name):
            out.append(
                Diagnostic(
                    f"`engine.env`: {name} looks like a credential, and a value here is "
                    "rendered in plain text",
                    field=where,
                    hint=f"keep it in a Secret: {secret_hint}",
                )
            )
    return out

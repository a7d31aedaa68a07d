"""catalog/data/spot-prices.csv holds dated spot-price observations, one row per instance type.

A spot price is a discount on the on-demand price of the same type, seen in one region on one
day: a row is a data error when its type is not in the catalog, its price is not below that
type's on-demand price, its date does not parse or is far from the on-demand price list's
date, or it does not say where the figure was read. A type without a row has no spot price in
the catalog; nothing estimates one.
"""

from __future__ import annotations

import csv
import datetime as dt
from importlib import resources

import pytest

from llmdeploy.catalog import ec2

HEADER = ["instance_type", "region", "spot_price_usd_hr", "as_of", "source"]
REGION = "us-east-1"  # the region of the on-demand column (instances.csv)
# A spot observation and the on-demand price list it is compared with must be of the same
# pricing era: AWS cut P4d/P5 on-demand prices by up to 45% in June 2025, so a spot price two
# years apart from the list would be compared with a price that no longer exists.
MAX_DAYS_FROM_ON_DEMAND = 730


def _rows() -> tuple[list[str], list[dict[str, str]]]:
    path = resources.files("llmdeploy.catalog").joinpath("data", "spot-prices.csv")
    reader = csv.DictReader(path.read_text(encoding="utf-8").splitlines())
    return list(reader.fieldnames or []), list(reader)


def problems(
    rows: list[dict[str, str]], catalog: dict[str, ec2.Instance], today: dt.date
) -> list[str]:
    """Every data error of the rows, one sentence each (empty when the rows are sound)."""
    out: list[str] = []
    seen: set[str] = set()
    for line, row in enumerate(rows, start=2):
        name = row["instance_type"]
        where = f"spot-prices.csv:{line} {name}"
        if name in seen:
            out.append(f"{where}: a second row for the type")
        seen.add(name)
        inst = catalog.get(name)
        if inst is None:
            out.append(f"{where}: not an instance type of instances.csv")
            continue
        if row["region"] != REGION:
            out.append(f"{where}: region {row['region']!r}, the on-demand prices are {REGION}")
        try:
            spot = float(row["spot_price_usd_hr"])
        except ValueError:
            out.append(f"{where}: price {row['spot_price_usd_hr']!r} is not a number")
            spot = None
        if spot is not None and inst.price_usd_hr is None:
            out.append(f"{where}: no on-demand price to be a discount on")
        elif (
            spot is not None and inst.price_usd_hr is not None and not 0 < spot < inst.price_usd_hr
        ):
            out.append(f"{where}: spot {spot} is not below on-demand {inst.price_usd_hr}")
        try:
            seen_on = dt.date.fromisoformat(row["as_of"])
        except ValueError:
            out.append(f"{where}: as_of {row['as_of']!r} is not YYYY-MM-DD")
            seen_on = None
        if seen_on is not None and seen_on > today:
            out.append(f"{where}: as_of {seen_on} is in the future")
        if seen_on is not None and inst.price_as_of is not None:
            gap = abs((seen_on - dt.date.fromisoformat(inst.price_as_of)).days)
            if gap > MAX_DAYS_FROM_ON_DEMAND:
                out.append(f"{where}: as_of {seen_on} is {gap} days from the on-demand list")
        if not row["source"].strip():
            out.append(f"{where}: no source")
    return out


def test_header_is_the_loaders() -> None:
    header, _ = _rows()
    assert header == HEADER


def test_every_row_is_a_dated_sourced_discount_on_a_catalog_type() -> None:
    _, rows = _rows()
    assert problems(rows, ec2.instances(), dt.date.today()) == []


GOOD = {
    "instance_type": "g5.xlarge",
    "region": REGION,
    "spot_price_usd_hr": "0.4",
    "as_of": "2026-01-20",
    "source": "aws ec2 describe-spot-price-history, use1-az4, lowest AZ",
}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"instance_type": "g9.xlarge"}, "not an instance type"),
        ({"region": "us-west-2"}, "region 'us-west-2'"),
        ({"spot_price_usd_hr": "1.006"}, "not below on-demand 1.006"),
        ({"spot_price_usd_hr": "0"}, "not below on-demand"),
        ({"spot_price_usd_hr": "?"}, "is not a number"),
        ({"instance_type": "p5e.48xlarge"}, "no on-demand price"),
        ({"as_of": "20/01/2026"}, "is not YYYY-MM-DD"),
        ({"as_of": "2026-12-31"}, "in the future"),
        ({"as_of": "2023-01-01"}, "days from the on-demand list"),
        ({"source": " "}, "no source"),
    ],
)
def test_a_bad_row_is_named(change: dict[str, str], says: str) -> None:
    catalog = ec2.instances()
    assert problems([GOOD], catalog, dt.date(2026, 6, 1)) == []
    found = problems([{**GOOD, **change}], catalog, dt.date(2026, 6, 1))
    assert len(found) == 1 and says in found[0], found


def test_a_second_row_for_a_type_is_named() -> None:
    found = problems([GOOD, GOOD], ec2.instances(), dt.date(2026, 6, 1))
    assert found == ["spot-prices.csv:3 g5.xlarge: a second row for the type"]

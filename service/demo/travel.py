"""A small MCP server for the demo (``codemode serve --demo``): fake, deterministic travel facts.

Run on its own with ``python -m service.demo.travel`` (stdio).  Nothing touches the network;
every answer is computed from the arguments, so the playground and the tour give the same result
everywhere.  It complements the shipping plugin: a cell can quote a parcel with ``quote_shipping``
and ask this server about the destination with ``MCP.travel.forecast({city})``.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

server = MCPServer("travel", instructions="Fake travel facts for the codemode demo: forecasts, countries, currency.")

_COUNTRIES = {
    "DE": ("Germany", "Berlin", "EUR"),
    "FR": ("France", "Paris", "EUR"),
    "GB": ("United Kingdom", "London", "GBP"),
    "JP": ("Japan", "Tokyo", "JPY"),
    "US": ("United States", "Washington, D.C.", "USD"),
}
#: Units of each currency per US dollar (fixed, made up for the demo).
_PER_USD = {"USD": 1.0, "EUR": 0.9, "GBP": 0.8, "JPY": 150.0}
_SKIES = ("sunny", "cloudy", "rain", "wind", "snow")


class Day(BaseModel):
    day: int = Field(description="days from today (0 is today)")
    sky: str
    high_c: int
    low_c: int


class Forecast(BaseModel):
    city: str
    days: list[Day]


class Country(BaseModel):
    code: str
    name: str
    capital: str
    currency: str


class Converted(BaseModel):
    amount: float
    currency: str


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.lower().encode()).digest()[:4], "big")


@server.tool()
def forecast(city: str = Field(max_length=100), days: int = Field(default=3, ge=1, le=7)) -> Forecast:
    """Weather forecast for a city (fake and deterministic): sky and temperatures per day."""
    seed = _seed(city)
    out = []
    for day in range(days):
        high = 5 + (seed >> (day * 3)) % 25
        out.append(Day(day=day, sky=_SKIES[(seed >> day) % len(_SKIES)], high_c=high, low_c=high - 4 - day % 3))
    return Forecast(city=city, days=out)


@server.tool()
def country(code: str = Field(min_length=2, max_length=2, description="ISO country code, e.g. FR")) -> Country:
    """Name, capital and currency of a country (DE, FR, GB, JP, US)."""
    entry = _COUNTRIES.get(code.upper())
    if entry is None:
        raise ValueError(f"unknown country {code!r}: this demo knows {', '.join(sorted(_COUNTRIES))}")
    name, capital, currency = entry
    return Country(code=code.upper(), name=name, capital=capital, currency=currency)


@server.tool()
def convert(
    amount: float = Field(ge=0, le=1e12),
    source: Literal["USD", "EUR", "GBP", "JPY"] = "USD",
    target: Literal["USD", "EUR", "GBP", "JPY"] = "EUR",
) -> Converted:
    """Convert an amount between USD, EUR, GBP and JPY at fixed demo rates."""
    return Converted(amount=round(amount / _PER_USD[source] * _PER_USD[target], 2), currency=target)


if __name__ == "__main__":
    server.run("stdio")

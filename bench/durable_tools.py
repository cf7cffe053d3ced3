"""T1's three tools, shared by the lionops, floor and peer workers (standard library only)."""

from __future__ import annotations

from typing import Any


def lookup(item: str) -> dict[str, Any]:
    """Find an item's price.

    Args:
        item: the item name.
    """
    return {"item": item, "price_cents": 1200}


def charge(amount_cents: int) -> dict[str, Any]:
    """Charge the customer.

    Args:
        amount_cents: the amount.
    """
    return {"charged_cents": amount_cents}


def ship(item: str) -> str:
    """Ship an item.

    Args:
        item: the item name.
    """
    return f"{item} shipped"

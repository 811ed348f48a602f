"""Unit formatting shared by the spec models and the OS profiles (kept apart so that neither imports the other)."""

from __future__ import annotations


def format_speed(mbps: int) -> str:
    return f"{mbps // 1000}G" if mbps % 1000 == 0 else f"{mbps}M"

"""The KIP-441 settings' names, defaults and bounds, read from kip441_settings.json (their one definition)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from schemas import read_json


@dataclass(frozen=True)
class SettingBounds:
    """One KIP-441 setting: its Kafka Streams name, Kafka's default and the range every part accepts."""

    name: str
    kafka_name: str
    default: int
    minimum: int
    maximum: int
    description: str

    def check(self, value: Any, where: str) -> int:
        """``value`` when it is an integer within the bounds; ValueError naming ``where`` and the range otherwise."""
        if isinstance(value, bool) or not isinstance(value, int) or not self.minimum <= value <= self.maximum:
            raise ValueError(f"{where}.{self.name} must be an integer in {self.minimum}..{self.maximum}, got {value!r}")
        return value


@cache
def kip441_settings() -> dict[str, SettingBounds]:
    """Every KIP-441 setting by name, in the file's order."""
    return {
        name: SettingBounds(
            name, spec["kafka_name"], spec["default"], spec["minimum"], spec["maximum"], spec["description"]
        )
        for name, spec in read_json("kip441_settings.json")["settings"].items()
    }


KIP441_NAMES: tuple[str, ...] = tuple(kip441_settings())

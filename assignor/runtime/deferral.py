"""Kept so that ``jobs/`` (owned elsewhere today) still imports; the rules live in ``assignor.protocol.deferral``."""

from assignor.protocol.deferral import Deferral, DeferralSettings, Departure, defer, pending_departures

__all__ = ["Deferral", "DeferralSettings", "Departure", "defer", "pending_departures"]

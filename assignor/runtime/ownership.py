"""KIP-429 ownership as the leader reads it: which member owns each partition claimed in the subscriptions.

Two members can claim one partition (a member that missed its eviction, a bug in a client): the leader keeps
one claim by a fixed rule, whatever order the members arrive in, and says which claims it dropped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from assignor.runtime.protocol import Partition

NO_GENERATION = -1  # what consumer protocol subscriptions before version 2 carry (and a member never assigned)


@dataclass(frozen=True)
class Claim:
    """One member's owned partitions, with the generation in which the group gave them to it."""

    member_id: str
    generation: int
    partitions: frozenset[Partition]


@dataclass(frozen=True)
class ClaimConflict:
    """A partition claimed by several members: the claim kept, and those dropped (as (member, generation))."""

    partition: Partition
    kept: tuple[str, int]
    dropped: tuple[tuple[str, int], ...]


def resolve_claims(claims: Iterable[Claim]) -> tuple[dict[Partition, str], list[ClaimConflict]]:
    """The owner of every claimed partition and the conflicts met; of several claims the one from the highest
    generation wins (the group gave it later), then the smallest member id."""
    claimants: dict[Partition, list[tuple[str, int]]] = defaultdict(list)
    for claim in claims:
        for partition in claim.partitions:
            claimants[partition].append((claim.member_id, claim.generation))
    owners: dict[Partition, str] = {}
    conflicts: list[ClaimConflict] = []
    for partition in sorted(claimants):
        ranked = sorted(set(claimants[partition]), key=lambda c: (-c[1], c[0]))
        owners[partition] = ranked[0][0]
        if len(ranked) > 1:
            conflicts.append(ClaimConflict(partition, ranked[0], tuple(ranked[1:])))
    return owners, conflicts

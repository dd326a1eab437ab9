"""Render a convergence simulation as rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from assignor.assignment import Role
from assignor.simulation import SimulationResult


def _tasks(tasks: frozenset[object]) -> str:
    return ",".join(str(t) for t in sorted(tasks)) or "-"  # type: ignore[type-var]


def rounds_table(result: SimulationResult) -> Table:
    """One row per rebalance with its counts and probing flag."""
    table = Table(title=f"{result.scenario}: rounds", title_justify="left")
    for column in ("round", "events", "clients", "moves", "warmups", "restored offsets", "probing"):
        table.add_column(column, justify="right" if column not in ("events", "probing") else "left")
    for r in result.rounds:
        events = " ".join(f"{e.kind}:{e.process_id}" for e in r.events) or "-"
        table.add_row(
            str(r.index),
            events,
            str(len(r.assignment.clients)),
            str(r.moves),
            str(r.warmups),
            f"{r.restored_offsets:,}",
            "yes" if r.assignment.probing_rebalance_needed else "no",
        )
    return table


def assignments_table(result: SimulationResult) -> Table:
    """Per round and client: its active, standby and warmup tasks."""
    table = Table(title=f"{result.scenario}: assignments", title_justify="left")
    for column in ("round", "client", Role.ACTIVE.value, Role.STANDBY.value, Role.WARMUP.value):
        table.add_column(column.lower())
    for r in result.rounds:
        for pid, ca in r.assignment.clients.items():
            table.add_row(str(r.index), pid, _tasks(ca.active), _tasks(ca.standby), _tasks(ca.warmup))
        table.add_section()
    return table


def print_simulation(result: SimulationResult, console: Console, *, show_assignments: bool) -> None:
    """Print the per-round table, optionally the assignments, and a one-line summary."""
    console.print(rounds_table(result))
    if show_assignments:
        console.print(assignments_table(result))
    seconds = len(result.rounds) * result.probing_interval_ms / 1000
    console.print(
        f"{'converged' if result.converged else 'NOT converged'} after {len(result.rounds)} rebalances "
        f"(~{seconds / 60:.0f} min of probing intervals): {result.total_moves} moves, "
        f"{result.total_warmups} warmups, {result.total_restored_offsets:,} offsets restored"
    )

"""The ``rebalance-planner`` command line; each pipeline stage arrives here as a subcommand."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import jsonschema
from rich.console import Console

from assignor import (
    AssignmentConfigs,
    GroupAssignment,
    GroupState,
    honor_plan,
    plan_group,
)
from assignor.baselines import BASELINE_ASSIGNORS
from assignor.scenarios import BUILTIN_SCENARIOS, ScenarioError, builtin_scenario, scenario_from_dict
from assignor.simulation import Assignor, RestoreRate, simulate
from jobs.cli.arguments import COUNT
from jobs.cli.console import cli_console
from jobs.cli.exits import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK
from jobs.cli.local import add_local_commands, run_local_command
from jobs.cli.operations import add_operations_commands, run_operations_command
from jobs.cli.pipeline import add_pipeline_commands, run_pipeline_command
from jobs.cli.runtime import add_runtime_commands, run_runtime_command
from jobs.cli.signing import add_signing_commands, run_signing_command
from jobs.cli.simulate import print_simulation
from jobs.demo.run import add_demo_command, run_demo_command
from jobs.settings import Settings
from schemas import read_json


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rebalance-planner",
        description="Plan, approve and carry out task movements for Kafka Streams-style consumer groups.",
        epilog="Settings come from RBP_ environment variables; `rebalance-planner settings` lists every one with its "
        "value and default. RBP_HOME is the data home (default ~/.local/share/rebalance-planner, or under "
        "$XDG_DATA_HOME): RBP_LAKE_ROOT (the lake, default RBP_HOME/lake), the fetched jars and Data Docs default "
        "under it. RBP_KAFKA_BOOTSTRAP and RBP_KAFKA_CONFIG (JSON, SASL/TLS) say where Kafka is. New here: "
        "`setup`, then `status` (docs/onboarding.md).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="command", parser_class=_Parser)
    sim = commands.add_parser(
        "simulate",
        help="replay rebalances of a scenario until the group stops probing; print a per-round table",
        description="Replay KIP-441 rebalances of a built-in or file scenario and print a per-round table.",
    )
    source = sim.add_mutually_exclusive_group()
    source.add_argument(
        "scenario",
        nargs="?",
        default="kip441-scaling-out",
        help=f"built-in scenario name (default kip441-scaling-out); one of: {', '.join(sorted(BUILTIN_SCENARIOS))}",
    )
    source.add_argument("--file", type=Path, help="scenario JSON file (schemas/scenario.schema.json)")
    sim.add_argument("--restore-rate", type=float, help="restore offsets/second/instance instead of full catch-up")
    sim.add_argument("--max-rounds", type=COUNT, help="stop after this many rebalances")
    sim.add_argument(
        "--assignor",
        choices=("kip441", "planner", "streams_broker"),
        default="kip441",
        help="kip441: Kafka's high-availability assignor at every rebalance (default); planner: plan once at the "
        "first rebalance, then honor that plan at every rebalance; streams_broker: Kafka's broker-side streams "
        "group assignment (KIP-1071: sticky target, moves staged behind warmups)",
    )
    sim.add_argument("--assignments", action="store_true", help="also print every round's assignment")
    sim.add_argument("--json", action="store_true", help="print one JSON line per round instead of tables")
    sim.add_argument("--list", action="store_true", help="list the built-in scenarios and exit")
    add_local_commands(commands)
    add_operations_commands(commands)
    add_pipeline_commands(commands)
    add_runtime_commands(commands)
    add_signing_commands(commands)
    add_demo_command(commands)
    return parser


def planning_leader() -> Assignor:
    """A leader that plans at its first rebalance and honors that plan afterwards (as an approved plan would be)."""
    target: GroupAssignment | None = None

    def leader(group: GroupState, configs: AssignmentConfigs) -> GroupAssignment:
        nonlocal target
        if target is None:
            target = plan_group(group, configs).target
        return honor_plan(target, group, configs)

    return leader


def _assignor(name: str) -> Assignor:
    """The assignor the simulate command replays, by its --assignor name."""
    if name == "planner":
        return planning_leader()
    return BASELINE_ASSIGNORS[name]  # kip441 or streams_broker, the assignors plans are compared with


def _read_scenario_file(path: Path) -> object:
    """Parse and schema-check a scenario file; ScenarioError names the file and the offending field."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ScenarioError(f"cannot read scenario file {str(path)!r}: {err}") from None
    schema = read_json("scenario.schema.json")
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ScenarioError(f"scenario file {str(path)!r} at {where}: {error.message}")
    return data


def _cmd_simulate(args: argparse.Namespace, console: Console) -> int:
    if args.list:
        for name in sorted(BUILTIN_SCENARIOS):
            console.print(f"[bold]{name}[/bold]: {BUILTIN_SCENARIOS[name]['description']}")
        return EXIT_OK
    if args.file is not None:
        scenario = scenario_from_dict(_read_scenario_file(args.file))
    else:
        scenario = builtin_scenario(args.scenario)
    if args.restore_rate is not None:
        scenario = replace(scenario, catch_up=RestoreRate(args.restore_rate))
    if args.max_rounds is not None:
        scenario = replace(scenario, max_rounds=args.max_rounds)
    result = simulate(scenario, _assignor(args.assignor))
    if args.json:
        for r in result.rounds:
            row = {
                "scenario": result.scenario,
                "round": r.index,
                "moves": r.moves,
                "warmups": r.warmups,
                "restored_offsets": r.restored_offsets,
                "probing_rebalance_needed": r.assignment.probing_rebalance_needed,
            }
            print(json.dumps(row))
    else:
        if scenario.description:
            console.print(f"{scenario.description} [assignor: {args.assignor}]")
        print_simulation(result, console, show_assignments=args.assignments)
    return EXIT_OK if result.converged else EXIT_FAILURE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    args = _build_parser().parse_args(argv)
    console = cli_console()
    try:
        if args.command == "simulate":
            return _cmd_simulate(args, console)
        local = run_local_command(args, console, Settings())
        if local is not None:
            return local
        operations = run_operations_command(args, console, Settings())
        if operations is not None:
            return operations
        pipeline = run_pipeline_command(args, console)
        if pipeline is not None:
            return pipeline
        ran = run_runtime_command(args, console, Settings())
        if ran is not None:
            return ran
        signed = run_signing_command(args, console, Settings())
        if signed is not None:
            return signed
        demo = run_demo_command(args, console, Settings())
        if demo is not None:
            return demo
    except ValueError as err:  # ScenarioError, InvalidGroupState and config errors: bad input
        print(f"rebalance-planner: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_FAILURE


if __name__ == "__main__":
    raise SystemExit(main())

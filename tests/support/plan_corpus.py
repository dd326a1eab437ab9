"""Prints a canonical dump of the core's decisions on a fixed corpus of groups, one JSON line per call.

Run in two processes, one on the compiled core and one on its sources, the dumps must be equal byte for byte:
plan_group (with and without a restore rate, and with a drain), honor_plan of each plan's target after its first
step, KIP-441's assignment and both baselines' replayed costs.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import json
import random
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import assignor
import assignor.flow
from assignor import AssignmentConfigs, GroupState, assign_high_availability, honor_plan, plan_group
from assignor.baselines import BASELINE_ASSIGNORS, baseline_cost
from assignor.catch_up import catch_up_fully

BENCH = Path(__file__).resolve().parents[2] / "bench" / "planner_bench.py"


def planner_bench() -> Any:
    """bench/planner_bench.py's group families, loaded by path: the benchmarks are scripts, not a package."""
    spec = importlib.util.spec_from_file_location("planner_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def canonical(value: Any) -> Any:
    """JSON-ready and independent of set iteration order: sets sorted, mappings by key, floats by repr."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return [[canonical(k), canonical(v)] for k, v in sorted(value.items(), key=lambda kv: repr(canonical(kv[0])))]
    if isinstance(value, (set, frozenset)):
        return sorted((canonical(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, enum.Enum):
        return canonical(value.value)
    if isinstance(value, float):
        return repr(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return repr(value)


def corpus(seeds: int) -> Iterator[tuple[str, GroupState, AssignmentConfigs]]:
    """Every benchmark family for ``seeds`` seeds, then the 64 x 6 and 1,000 x 100 speed cases."""
    bench = planner_bench()
    for family, make in bench.FAMILIES.items():
        for seed in range(seeds):
            group, configs = make(random.Random(seed))
            yield f"{family}/{seed}", group, configs
    for case in bench.SPEED_CASES[:3]:
        group, configs = bench.speed_group(case)
        yield case.name, group, configs


def dump(seeds: int) -> Iterator[dict[str, Any]]:
    """The canonical records for the corpus."""
    for name, group, configs in corpus(seeds):
        plan = plan_group(group, configs)
        yield {"group": name, "plan_group": canonical(plan)}
        yield {"group": name, "rated": canonical(plan_group(group, configs, restore_rate=5_000.0))}
        yield {"group": name, "kip441": canonical(assign_high_availability(group, configs))}
        if plan.steps and len(group.stateful_tasks) <= 250:
            later = catch_up_fully(group, plan.steps[0])
            yield {"group": name, "honor_plan": canonical(honor_plan(plan.target, later, configs))}
            yield {"group": name, "replanned": canonical(plan_group(later, configs))}
            for baseline in sorted(BASELINE_ASSIGNORS):
                yield {"group": name, baseline: canonical(baseline_cost(group, configs, baseline))}
        processes = sorted(c.process_id for c in group.clients)
        if len(processes) > 2 and len(group.stateful_tasks) <= 250:
            drained = plan_group(group, configs, draining=frozenset(processes[:1]))
            yield {"group": name, "drain": canonical(drained)}


def main() -> None:
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    print(json.dumps({"core": assignor.CORE_BUILD.name, "flow": assignor.flow.__file__}))
    for record in dump(seeds):
        print(json.dumps(record, sort_keys=True))


if __name__ == "__main__":
    main()

"""Clicks and seconds for a person to approve only the changing groups of `make demo` (issue #32's closing note).

Starts the real demo in interactive mode as a child (it dies with this process), follows its output to the approval
step, then in headless Chromium logs into its Airflow, opens the run's decision page, chooses the "changes only"
filter (the page opens on "changes and keeps"), selects all shown, "Approve selected…", Confirm. Counts each
click/keystroke the person makes (the login apart) and times the decision page from its first load to the page
confirming the decision (the screenshot's own time left out). ``--approve changes-and-keeps`` measures the page's
default instead (the changing groups and the keep-plans). Lets the demo finish (publish, convergence, observe) and
records how it ended. Prints one JSON line and a table with the load average; screenshots at 1,600 x 1,000 go to
var/test-artifacts/demo-decision-*.png (demo-decision-changes-and-keeps-*.png for that choice).

    .venv/bin/python bench/demo_decision.py [--approve changes] [--simulated 300] [--root var/demo-decision]
        [--timeout 2400]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from playwright.sync_api import Page, expect, sync_playwright
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.orchestration.decision import APPROVE_SELECTED
from jobs.polling import wait_until
from jobs.processes import spawn, stop_group
from jobs.report.links import decide_url
from tests.support.browser import LOGIN_ACTIONS, chromium, login

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "var" / "test-artifacts"
SCREEN = {"width": 1600, "height": 1000}
PLANNING = "rebalance_planning"
# What to approve -> the filter (its radio button's name) that shows exactly those groups.
FILTERS = {"changes": "changes only", "changes-and-keeps": "changes and keeps"}


def artifact(approve: str, suffix: str) -> Path:
    """Where a run's screenshot, log or JSON goes: demo-decision<suffix>, or demo-decision-changes-and-keeps<suffix>
    for that choice (so one run of each keeps both)."""
    stem = "demo-decision" if approve == "changes" else f"demo-decision-{approve}"
    return ARTIFACTS / f"{stem}{suffix}"


# What the demo prints (jobs/demo/planning.py, run.py), matched on its piped, unwrapped output.
UI_LINE = re.compile(r"UI: (?P<url>http://\S+)\s+user (?P<user>\S+)\s+password (?P<password>\S+)")
TRIGGERED = re.compile(rf"triggered {PLANNING} run (?P<run_id>\S+)")
WAITING = "Waiting for your decision in the UI"
PUBLISHED = re.compile(r"^\s*[\d.]+s\s+publish: success")
DONE = "done; stopping everything the demo started"


@dataclass
class DemoOutput:
    """The demo's output lines as they arrive (a reader thread appends; the bench polls), copied to a log file."""

    lines: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def follow(self, stream: IO[bytes], log: Path) -> threading.Thread:
        def read() -> None:
            with log.open("w", encoding="utf-8") as out:
                for raw in stream:
                    line = raw.decode("utf-8", "replace").rstrip("\n")
                    out.write(line + "\n")
                    out.flush()
                    with self.lock:
                        self.lines.append(line)

        thread = threading.Thread(target=read, name="demo-output", daemon=True)
        thread.start()
        return thread

    def find(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        with self.lock:
            return next((m for m in map(pattern.search, self.lines) if m), None)

    def has(self, text: str) -> bool:
        with self.lock:
            return any(text in line for line in self.lines)

    def tail(self, n: int) -> list[str]:
        with self.lock:
            return self.lines[-n:]


def await_line(demo: subprocess.Popen[bytes], found: Callable[[], bool], what: str, timeout_s: float) -> None:
    """Poll the demo's output until ``found``; a demo that exits first is an error naming what was awaited."""

    def seen() -> bool:
        if found():
            return True
        if demo.poll() is not None:
            raise RuntimeError(f"the demo exited {demo.returncode} before {what}")
        return False

    wait_until(seen, timeout_s, what, poll_s=0.5)


@dataclass
class Person:
    """The actions a person makes on the page, each counted (a click, a fill or a navigation)."""

    page: Page
    actions: list[str] = field(default_factory=list)

    def open(self, url: str) -> None:
        self.actions.append("open the decision page")
        self.page.goto(url)

    def click(self, name: str) -> None:
        self.actions.append(f"click {name}")
        self.page.get_by_role("button", name=name).click()

    def choose(self, name: str) -> None:
        """Choose a filter: one click, unless the page opened on it."""
        radio = self.page.get_by_role("radio", name=name, exact=True)
        if not radio.is_checked():
            self.actions.append(f"click {name}")
            radio.check()


@dataclass(frozen=True)
class Decision:
    """What the person did on the decision page and what it showed."""

    actions: tuple[str, ...]
    seconds: float
    screenshot_s: float
    approved: int  # the groups the filter showed and the person approved
    offered: int
    planned: int
    headline: str
    confirm_text: str
    confirm_warning: str  # the keep-plans left out and what KIP-441 may move there ("" when none)
    state: str


def page_int(text: str, pattern: str, what: str) -> int:
    """An integer the page shows (digits with thousands commas), bounded: a page that lacks it is an error."""
    m = re.search(pattern, text)
    if m is None:
        raise RuntimeError(f"the decision page does not show {what}: {text[:200]!r}")
    digits = m.group(1).replace(",", "")
    if not digits.isdigit() or len(digits) > 9:
        raise RuntimeError(f"the decision page shows an implausible {what}: {m.group(1)!r}")
    return int(digits)


def decide(page: Page, url: str, approve: str) -> Decision:
    """Approve what ``approve`` names (FILTERS) as a person does; time from the page's first load to its
    confirmation."""
    person = Person(page)
    started = time.monotonic()
    person.open(url)
    expect(page.get_by_test_id("headline")).to_contain_text("groups change", timeout=60_000)
    expect(page.get_by_test_id("state")).to_contain_text("Awaiting a decision", timeout=60_000)
    shot = time.monotonic()
    page.screenshot(path=str(artifact(approve, "-before.png")))
    screenshot_s = time.monotonic() - shot
    person.choose(FILTERS[approve])
    shown = page.locator("#shown-count").inner_text()
    approved = page_int(shown, r"of ([\d,]+) matching", "how many groups match the filter")
    offered = page_int(shown, r"\(([\d,]+) awaiting a decision\)", "how many plans await a decision")
    planned = page_int(page.locator("section[aria-labelledby=decision] p.note").inner_text(),
                       r"^([\d,]+) groups? planned", "how many groups were planned")  # fmt: skip
    person.click("select all shown")
    expect(page.get_by_test_id("selection")).to_contain_text(f"{approved:,} plan", timeout=30_000)
    person.click("Approve selected…")
    confirm = page.locator("#confirm-text")
    expect(confirm).to_contain_text(f"Approve {approved:,} plan", timeout=30_000)
    confirm_text = confirm.inner_text()
    warning = page.locator("#confirm-warning")
    confirm_warning = warning.inner_text() if warning.is_visible() else ""
    person.click("Confirm")
    state = page.get_by_test_id("state")
    expect(state).to_contain_text("Decided by", timeout=180_000)
    seconds = time.monotonic() - started - screenshot_s
    page.screenshot(path=str(artifact(approve, "-after.png")))
    return Decision(
        actions=tuple(person.actions),
        seconds=seconds,
        screenshot_s=screenshot_s,
        approved=approved,
        offered=offered,
        planned=planned,
        headline=page.get_by_test_id("headline").inner_text(),
        confirm_text=confirm_text,
        confirm_warning=confirm_warning,
        state=state.inner_text(),
    )


def published_state(
    page: Page, demo: subprocess.Popen[bytes], output: DemoOutput, timeout_s: float, approve: str
) -> str:
    """Once the demo saw publish succeed, the decision page again (reloaded): what it says was published."""
    await_line(demo, lambda: output.find(PUBLISHED) is not None, "the demo's publish step", timeout_s)
    page.reload()
    state = page.get_by_test_id("state")
    expect(state).to_contain_text("published", timeout=60_000)
    page.screenshot(path=str(artifact(approve, "-published.png")))
    return state.inner_text()


def run(args: argparse.Namespace) -> dict[str, Any]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    planner = Path(sys.executable).parent / "rebalance-planner"
    command = [str(planner), "demo", "--interactive", "--simulated", str(args.simulated), "--root", str(args.root)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RBP_HOME": os.environ.get("RBP_HOME", str(ROOT / "var"))}
    load_start = os.getloadavg()[0]
    began = time.monotonic()
    demo = spawn(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    assert demo.stdout is not None
    output = DemoOutput()
    reader = output.follow(demo.stdout, artifact(args.approve, "-demo.log"))
    try:
        await_line(demo, lambda: output.has(WAITING), "the demo to wait for a decision", args.timeout)
        ui, triggered = output.find(UI_LINE), output.find(TRIGGERED)
        if ui is None or triggered is None:
            raise RuntimeError("the demo did not print its Airflow URL, login or run id")
        to_approval_s = time.monotonic() - began
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport=SCREEN)  # type: ignore[arg-type]
                login(page, ui["url"], ui["password"], ui["user"])
                load_decision = os.getloadavg()[0]
                decision = decide(page, decide_url(ui["url"], PLANNING, triggered["run_id"]), args.approve)
                after_publish = published_state(page, demo, output, args.timeout, args.approve)
            finally:
                browser.close()
        rc = demo.wait(timeout=args.timeout)
        reader.join(timeout=30)
    finally:
        stop_group(demo)  # only if the bench failed before the demo ended; a finished demo has no group left
    clicks = [a for a in decision.actions if a.startswith("click")]
    return {
        "bench": "demo_decision",
        "clicks": len(clicks),
        "seconds": round(decision.seconds, 2),
        "approve": args.approve,
        "groups_approved": decision.approved,
        "groups_total": decision.planned,
        "load": round(load_decision, 2),
        "actions": list(decision.actions),
        "login_actions": LOGIN_ACTIONS,
        "plans_offered": decision.offered,
        "chosen": APPROVE_SELECTED,
        "headline": decision.headline,
        "confirm": decision.confirm_text,
        "confirm_warning": decision.confirm_warning,
        "decided": decision.state,
        "after_publish": after_publish,
        "screenshot_s_excluded": round(decision.screenshot_s, 2),
        "demo_to_approval_s": round(to_approval_s, 1),
        "demo_total_s": round(time.monotonic() - began, 1),
        "demo_exit": rc,
        "demo_ended": "done" if rc == 0 and output.has(DONE) else f"failed: {' | '.join(output.tail(3))}",
        "load_start": round(load_start, 2),
        "load_end": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
        "simulated_groups": args.simulated,
        "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--approve",
        choices=sorted(FILTERS),
        default="changes",
        help="approve only the changing groups (default) or the changing groups and the keep-plans",
    )
    parser.add_argument("--simulated", type=int, default=300, help="the demo's report-only groups (default 300)")
    parser.add_argument("--root", type=Path, default=ROOT / "var" / "demo-decision", help="the demo's directory")
    parser.add_argument("--timeout", type=float, default=2400, help="seconds for each wait on the demo")
    args = parser.parse_args()
    if not 0 <= args.simulated <= 10_000:
        parser.error(f"--simulated {args.simulated}: between 0 and 10,000 groups")
    row = run(args)
    print(json.dumps(row), flush=True)
    artifact(args.approve, ".json").write_text(json.dumps(row, indent=1) + "\n", encoding="utf-8")
    what = FILTERS[row["approve"]]
    table = Table(title=f"approving the demo's {what} (load {row['load']} on {row['cores']} cores)")
    for column in ("clicks", "seconds", "approved", "total", "login actions", "demo"):
        table.add_column(column, justify="right")
    table.add_row(str(row["clicks"]), f"{row['seconds']:.1f}", str(row["groups_approved"]), str(row["groups_total"]),
                  str(row["login_actions"]), row["demo_ended"][:40])  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()

"""An Airflow plugin that serves the HTML reports, the Data Docs and each run's decision page to the people logged
into Airflow: a "Rebalance reports" link in its navigation and a "Decide" tab on the planning runs. The decision page
answers the approval through Airflow's own REST API with the person's own token, after refusing a selection that
names a group without a validated plan."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from airflow.plugins_manager import AirflowPlugin
from fastapi import Body, Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse

from jobs.orchestration.confirmation import asked_offer, offer_digest, offered_entries
from jobs.orchestration.csp import STRICT_CSP, page_csp
from jobs.orchestration.decision import (
    APPROVAL_TASK,
    APPROVE_SELECTED,
    OFFER_PARAM,
    PUBLISH_TASK,
    REJECT_ALL,
    REVIEW_TASK,
    DecisionError,
    answer_hold_s,
    answer_reason,
    check_selection,
)
from jobs.report.decide_page import decision_path
from jobs.report.links import URL_PREFIX
from jobs.report.render import page
from jobs.settings import Settings


def _authenticated() -> list[object]:
    # The api-server's own check: a valid Airflow JWT (the UI's session cookie or a bearer token). Kept out of the
    # module's imports so reports_app can be built and tested without Airflow's API server.
    from airflow.api_fastapi.core_api.security import requires_authenticated  # noqa: PLC0415

    return [Depends(requires_authenticated())]


# The Data Docs share the approval API's origin: nothing but this origin may run script, load styles or fonts, or
# frame them; validate serves GX's CDN assets from the site's static/vendor (jobs/pipeline/data_docs_assets.py).
# An HTML page's own inline scripts and onclick handlers run by their hashes (csp.py), no other inline script.
NOSNIFF = {"X-Content-Type-Options": "nosniff"}


@functools.lru_cache(maxsize=256)
def _page_csp(path: Path, mtime_ns: int, size: int) -> str:
    """The page's policy, computed once per version of the file (its path, modification time and size)."""
    return page_csp(path.read_text(encoding="utf-8", errors="replace"))


def data_docs_headers(target: Path) -> dict[str, str]:
    """The headers a Data Docs file is served with: an HTML page's own policy, the strict one for anything else."""
    if target.suffix.lower() not in (".html", ".htm"):
        return {"Content-Security-Policy": STRICT_CSP, **NOSNIFF}
    stat = target.stat()
    return {"Content-Security-Policy": _page_csp(target, stat.st_mtime_ns, stat.st_size), **NOSNIFF}


def reports_app(reports: Path, data_docs: Path, dependencies: list[object] | None = None) -> FastAPI:
    """The reports (an index, newest first, and each file) and the Data Docs, read from disk on each request."""
    app = FastAPI(title="Rebalance reports", dependencies=dependencies or [])  # type: ignore[arg-type]

    @app.get("/reports/", response_class=HTMLResponse)
    def index() -> str:
        files = (
            sorted(reports.glob("*.html"), key=lambda p: p.stat().st_mtime, reverse=True) if reports.is_dir() else []
        )
        return page("index.html.j2", reports=[(p.name, p.stem) for p in files], total=len(files))

    @app.get("/reports/{name}")
    def report(name: str) -> FileResponse:
        path = reports / name
        # One file of the reports directory by name: no sub-paths, nothing but the reports.
        if "/" in name or not name.endswith(".html") or not path.is_file():
            raise HTTPException(status_code=404, detail=f"no report {name!r} in {reports}")
        return FileResponse(path, media_type="text/html")

    # A route, not app.mount(): FastAPI applies the app's dependencies (the login check) to routes only.
    @app.get("/data-docs/{path:path}")
    def data_docs_file(path: str) -> FileResponse:
        root = data_docs.resolve()
        target = (root / path).resolve()
        if target.is_dir():
            target = target / "index.html"
        if not target.is_relative_to(root) or not target.is_file():
            raise HTTPException(status_code=404, detail=f"no {path!r} in the Data Docs")
        return FileResponse(target, headers=data_docs_headers(target))

    decide_routes(app, reports)
    return app


class AirflowCalls:
    """Airflow's REST API called as the person on the page (their own token): Airflow checks what they may read and
    whether they may answer, and records them as the one who answered."""

    def __init__(self, request: Request) -> None:
        auth = request.headers.get("authorization", "")
        from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN  # noqa: PLC0415

        token = auth[7:] if auth.lower().startswith("bearer ") else request.cookies.get(COOKIE_NAME_JWT_TOKEN, "")
        if not token:
            raise HTTPException(status_code=401, detail="not logged in")
        from airflow.configuration import conf  # noqa: PLC0415 (only inside the api-server)

        base = conf.get("api", "base_url", fallback="") or f"{request.url.scheme}://{request.url.netloc}"
        self.client = httpx.Client(base_url=base.rstrip("/") + "/api/v2", timeout=30,
                                   headers={"Authorization": f"Bearer {token}"})  # fmt: skip

    def _call(self, method: str, path: str, **kwargs: Any) -> Any | None:
        """Airflow's JSON answer, None for a 404; its refusal passed on; no answer at all is a 502 naming the error
        type only (the person's token never leaves in an error)."""
        try:
            response = self.client.request(method, path, **kwargs)
        except httpx.HTTPError as err:
            raise HTTPException(status_code=502, detail=f"Airflow did not answer: {type(err).__name__}") from err
        if response.status_code == 404:
            return None
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 400:
            detail = body.get("detail", response.text) if isinstance(body, dict) else response.text
            raise HTTPException(status_code=response.status_code, detail=f"Airflow answered: {detail}")
        if body is None:
            raise HTTPException(status_code=502, detail=f"Airflow answered {path} with no JSON")
        return body

    def run_path(self, dag_id: str, run_id: str) -> str:
        return f"/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}"

    def xcom(self, dag_id: str, run_id: str, task_id: str) -> Any | None:
        """The task's return value, or None when it has none (yet)."""
        path = f"{self.run_path(dag_id, run_id)}/taskInstances/{task_id}/xcomEntries/return_value"
        entry = self._call("GET", path, params={"deserialize": "true"})
        return entry.get("value") if isinstance(entry, dict) else None

    def hitl(self, dag_id: str, run_id: str) -> dict[str, Any] | None:
        entry = self._call("GET", f"{self.run_path(dag_id, run_id)}/taskInstances/{APPROVAL_TASK}/-1/hitlDetails")
        return entry if isinstance(entry, dict) else None

    def answer(self, dag_id: str, run_id: str, chosen: list[str], params: dict[str, Any]) -> Any | None:
        body = {"chosen_options": chosen, "params_input": params}
        path = f"{self.run_path(dag_id, run_id)}/taskInstances/{APPROVAL_TASK}/-1/hitlDetails"
        return self._call("PATCH", path, json=body)


def decision_state(api: AirflowCalls, dag_id: str, run_id: str) -> dict[str, Any]:
    """Where the run's decision stands: awaiting, or decided (by whom, when, what was recorded and published)."""
    hitl = api.hitl(dag_id, run_id)
    if hitl is None:
        return {"state": "not asked", "message": "the approval step has not asked yet (the review is still running)"}
    if not hitl.get("response_received"):
        users = ", ".join(str(u.get("name") or u.get("id")) for u in hitl.get("assigned_users") or [])
        return {"state": "awaiting", "approvers": users}
    user = hitl.get("responded_by_user") or {}
    params = hitl.get("params_input") or {}
    chosen = ", ".join(hitl.get("chosen_options") or [])
    decided = api.xcom(dag_id, run_id, APPROVAL_TASK)
    published = api.xcom(dag_id, run_id, PUBLISH_TASK)
    return {
        "state": "decided",
        "by": user.get("name") or user.get("id") or "the timeout",
        "at": hitl.get("responded_at"),
        "chosen": chosen,
        "selected": len(params.get("selected_groups") or []),
        "reason": params.get("reason"),
        "decided": {"approved": decided.get("approved"), "rejected": decided.get("rejected")}
        if isinstance(decided, dict)
        else None,
        "published": published if isinstance(published, int) else None,
    }


# How long the decision page holds an answer for the approval task to start waiting before refusing it.
HOLD_LIMIT_S = 30.0


def decide_routes(app: FastAPI, reports: Path) -> None:
    """The decision page of a planning run, its state, and the answer it relays."""

    def reviewed(api: AirflowCalls, dag_id: str, run_id: str) -> dict[str, Any]:
        value = api.xcom(dag_id, run_id, REVIEW_TASK)
        if not isinstance(value, dict) or "snapshot_id" not in value:
            raise HTTPException(status_code=404, detail=f"run {run_id!r} of {dag_id!r} has no review yet")
        return value

    def airflow(request: Request) -> Iterator[AirflowCalls]:
        api = AirflowCalls(request)
        try:
            yield api
        finally:  # one client per request: closed with it, not left to the garbage collector
            api.client.close()

    @app.get("/decide/{dag_id}/{run_id}")
    def decide_page(dag_id: str, run_id: str, api: AirflowCalls = Depends(airflow)) -> FileResponse:  # noqa: B008
        snapshot_id = str(reviewed(api, dag_id, run_id)["snapshot_id"])
        path = decision_path(reports, snapshot_id)
        if "/" in snapshot_id or not path.is_file():
            raise HTTPException(status_code=404, detail=f"no decision page for snapshot {snapshot_id!r}")
        return FileResponse(path, media_type="text/html")

    @app.get("/decide/{dag_id}/{run_id}/state")
    def decide_state(dag_id: str, run_id: str, api: AirflowCalls = Depends(airflow)) -> dict[str, Any]:  # noqa: B008
        return decision_state(api, dag_id, run_id)

    def settled(api: AirflowCalls, dag_id: str, run_id: str) -> dict[str, Any]:
        """The approval's HITL record once its task has waited SETTLE_S (apache/airflow#71580), polling Airflow for
        up to HOLD_LIMIT_S; refuse (409) if it is not waiting for an answer by then."""
        deadline = time.monotonic() + HOLD_LIMIT_S
        while True:
            hitl = api.hitl(dag_id, run_id)
            if hitl is None or hitl.get("response_received"):
                raise HTTPException(status_code=409, detail="the approval step is not waiting for an answer")
            try:
                hold = answer_hold_s(hitl, datetime.now(UTC))
            except DecisionError as err:
                raise HTTPException(status_code=502, detail=str(err)) from err
            if hold == 0:
                return hitl
            if time.monotonic() >= deadline:
                raise HTTPException(status_code=409, detail="the approval step is not waiting yet: answer again")
            time.sleep(min(hold or 1.0, max(0.0, deadline - time.monotonic()), 1.0))

    @app.post("/decide/{dag_id}/{run_id}")
    def decide(
        dag_id: str,
        run_id: str,
        answer: dict[str, Any] = Body(...),  # noqa: B008
        api: AirflowCalls = Depends(airflow),  # noqa: B008
    ) -> dict[str, Any]:
        review = reviewed(api, dag_id, run_id)
        candidates = dict(review.get("candidates") or {})

        def offer(hitl: dict[str, Any]) -> str:
            """The offer digest the approval step asked with, after checking the review's record still makes it."""
            asked = asked_offer(hitl)
            try:
                made = offer_digest(*offered_entries(review))
            except DecisionError as err:
                raise HTTPException(status_code=502, detail=str(err)) from err
            if asked != made:  # publish would refuse it: the answer is not spent on an offer nobody can sign
                detail = f"the plans offered changed after the approval step asked ({made[:12]}, asked {asked})"
                raise HTTPException(status_code=409, detail=detail)
            return made

        try:
            reason = answer_reason(answer)
        except DecisionError as err:
            raise HTTPException(status_code=400, detail=str(err)) from err
        if answer.get("option") == "approve":
            try:
                picked = check_selection(answer.get("groups"), candidates)
            except DecisionError as err:  # refused here: Airflow's one-time answer is not spent on a typo
                raise HTTPException(status_code=400, detail=str(err)) from err
            if not picked:
                raise HTTPException(status_code=400, detail="no group selected: select plans, or reject all")
            asked = offer(settled(api, dag_id, run_id))
            chosen = {"selected_groups": picked, "reason": reason, OFFER_PARAM: asked}
            api.answer(dag_id, run_id, [APPROVE_SELECTED], chosen)
        elif answer.get("option") == "reject":
            # Nothing is signed on a rejection: the offer goes back only because Airflow wants every field answered.
            hitl = settled(api, dag_id, run_id)
            refused = {"selected_groups": None, "reason": reason, OFFER_PARAM: asked_offer(hitl)}
            api.answer(dag_id, run_id, [REJECT_ALL], refused)
        else:
            raise HTTPException(status_code=400, detail="option must be 'approve' or 'reject'")
        return decision_state(api, dag_id, run_id)


def _app() -> FastAPI:
    settings = Settings()
    return reports_app(settings.lake_root.parent.resolve() / "reports", settings.data_docs.resolve(), _authenticated())


class RebalanceReportsPlugin(AirflowPlugin):
    """Registered through the ``airflow.plugins`` entry point of pyproject.toml."""

    name = "rebalance_reports"
    fastapi_apps = [  # noqa: RUF012 (AirflowPlugin declares these as plain lists)
        {"app": _app(), "url_prefix": URL_PREFIX, "name": "Rebalance reports"}
    ]
    external_views = [  # noqa: RUF012
        {
            "name": "Rebalance reports",
            "href": f"{URL_PREFIX}/reports/",
            "destination": "nav",
            "url_route": "rebalance-reports",
        },
        {  # a tab on each planning run: the decision page of that run
            "name": "Decide",
            "href": f"{URL_PREFIX}/decide/{{DAG_ID}}/{{RUN_ID}}",
            "destination": "dag_run",
            "url_route": "rebalance-decide",
        },
    ]

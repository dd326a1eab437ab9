"""An Airflow plugin that serves the HTML reports and the Data Docs to the people logged into Airflow, and puts a
"Rebalance reports" link in its navigation: the approval page links to the report it summarises."""

from __future__ import annotations

from pathlib import Path

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

from jobs.report.links import URL_PREFIX
from jobs.report.render import page
from jobs.settings import Settings


def _authenticated() -> list[object]:
    # The api-server's own check: a valid Airflow JWT (the UI's session cookie or a bearer token). Kept out of the
    # module's imports so reports_app can be built and tested without Airflow's API server.
    from airflow.api_fastapi.core_api.security import requires_authenticated  # noqa: PLC0415

    return [Depends(requires_authenticated())]


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
        return FileResponse(target)

    return app


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
        }
    ]

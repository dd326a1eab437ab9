"""Airflow on one machine for the demo and the tests: a temporary AIRFLOW_HOME on SQLite, standalone's parts (every
listener on 127.0.0.1) or an api-server in its own process group, and a REST client that triggers runs and answers
approvals."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import ssl
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from jobs.polling import wait_until
from jobs.processes import free_port, spawn

log = logging.getLogger(__name__)
DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"
FINISHED = {"success", "failed"}


# What `airflow standalone` runs, but every listener on 127.0.0.1: standalone's scheduler and triggerer start
# Airflow's log servers, which bind every interface with no setting to change it. They are skipped: the api-server
# reads the task logs from the same disk. The first part to exit stops the rest (and so shows in process.poll()).
STANDALONE = """
trap 'kill 0' TERM INT
"$1" api-server --port "$2" --host 127.0.0.1 &
"$1" scheduler --skip-serve-logs &
"$1" dag-processor &
"$1" triggerer --skip-serve-logs &
wait -n
kill 0
"""


SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
# Where the simple auth manager keeps the passwords it generates (Airflow's default name in AIRFLOW_HOME).
PASSWORDS_FILE = "simple_auth_manager_passwords.json.generated"
# Publish's own read-only login (a viewer: it reads the person's answer, cannot give one), added to every
# installation's users; its password is made before Airflow starts, and kept for publish in SIGNER_LOGIN_FILE.
SIGNER_USER = "rbp-signer"
SIGNER_LOGIN_FILE = "signer-login"


class AirflowError(RuntimeError):
    """Airflow did not start, refused a request, or a run did not get where it was expected to within the deadline."""


def _airflow_bin() -> str:
    return str(Path(sys.executable).with_name("airflow"))


@dataclass
class LocalAirflow:
    """One Airflow installation under ``home`` (SQLite), serving its UI and REST API on ``port``."""

    home: Path
    port: int = field(default_factory=free_port)
    # The scheduler's and triggerer's log servers have fixed default ports: two installations would collide.
    log_ports: tuple[int, int] = field(default_factory=lambda: (free_port(), free_port()))
    # Added to (or, with None, removed from) the environment this process passes on.
    extra_env: Mapping[str, str | None] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    _tokens: dict[str, str] = field(default_factory=dict)
    # How the REST client verifies an HTTPS api-server (httpx's `verify`): the deployment's CA context there.
    verify: ssl.SSLContext | bool = True
    _what: str = "standalone"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment every Airflow command of this installation runs with."""
        env = {
            **os.environ,
            # standalone runs its parts as `airflow ...` commands: the venv's bin must come first on PATH
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            # What `airflow standalone` would force (launch runs the parts itself; see STANDALONE).
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_DIR),
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self.log_ports[0]),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(self.log_ports[1]),
            "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "PYTHONUNBUFFERED": "1",
        }
        env.update(
            {
                "RBP_AIRFLOW_API_URL": self.url,
                "RBP_AIRFLOW_API_USER": SIGNER_USER,
                "RBP_AIRFLOW_API_PASSWORD_FILE": str(self.home / SIGNER_LOGIN_FILE),
            }
        )
        for name, value in self.extra_env.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        users = env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS") or "admin:admin"
        if f"{SIGNER_USER}:" not in users:
            env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = f"{users},{SIGNER_USER}:viewer"
        return env

    def migrate(self) -> None:
        """Create the metadata database (idempotent)."""
        self.secure_home()
        self.command("db", "migrate", timeout_s=300)

    def secure_home(self) -> None:
        """The home (metadata database, logs, configuration) the user's alone, mode 0700, and the passwords file
        made 0600 before Airflow writes it: Airflow appends to it keeping its mode, and would create it 0644."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.home.chmod(0o700)
        passwords = self.home / PASSWORDS_FILE
        os.close(os.open(passwords, os.O_WRONLY | os.O_CREAT, 0o600))
        passwords.chmod(0o600)  # one made by an earlier Airflow with the umask's mode
        known = json.loads(passwords.read_text(encoding="utf-8").strip() or "{}")
        if SIGNER_USER not in known:  # Airflow keeps the passwords it finds and makes only the missing ones
            known[SIGNER_USER] = secrets.token_urlsafe(18)
            passwords.write_text(json.dumps(known), encoding="utf-8")
        login = self.home / SIGNER_LOGIN_FILE
        os.close(os.open(login, os.O_WRONLY | os.O_CREAT, 0o600))
        login.write_text(str(known[SIGNER_USER]), encoding="utf-8")

    def command(self, *args: str, timeout_s: float = 120) -> str:
        """Run an ``airflow`` CLI command against this installation; its stdout."""
        done = subprocess.run(
            [_airflow_bin(), *args], env=self.env(), capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if done.returncode != 0:
            raise AirflowError(f"airflow {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def launch(self, what: str = "standalone") -> LocalAirflow:
        """Start Airflow's parts (``standalone``: api-server, scheduler, dag-processor, triggerer; or ``api-server``
        alone) in their own process group without waiting for them."""
        self.migrate()
        self._what = what
        logfile = (self.home / f"{what}.log").open("ab")
        args = [_airflow_bin(), "api-server", "--port", str(self.port), "--host", "127.0.0.1"]
        if what == "standalone":
            args = ["bash", "-c", STANDALONE, "standalone", _airflow_bin(), str(self.port)]
        # spawn: its own process group, sent SIGTERM if we die (standalone's trap then stops every part)
        self.process = spawn(args, env=self.env(), stdout=logfile, stderr=subprocess.STDOUT)
        log.info("airflow %s starting on %s (pid %d, log %s)", what, self.url, self.process.pid, logfile.name)
        return self

    def wait_ready(self, timeout_s: float = 180) -> LocalAirflow:
        """Until the REST API answers and a token can be had."""

        def answering() -> bool:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise AirflowError(f"airflow {self._what} exited ({code}); see {self.home / (self._what + '.log')}")
            try:
                if httpx.get(f"{self.url}/api/v2/monitor/health", timeout=2, verify=self.verify).status_code == 200:
                    self.token()
                    return True
            except (httpx.HTTPError, AirflowError):
                pass
            return False

        _until(answering, timeout_s, f"airflow {self._what} to answer on {self.url}")
        return self

    def start(self, what: str = "standalone", timeout_s: float = 180) -> LocalAirflow:
        """Launch, then wait until it answers; stopped again when it does not (a caller's ``with`` never began)."""
        self.launch(what)
        try:
            return self.wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the whole process group (the parent alone would leave scheduler and workers running)."""
        if self.process is None or self.process.poll() is not None:
            return
        pgid = os.getpgid(self.process.pid)
        os.killpg(pgid, signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.process.wait()
        with contextlib.suppress(ProcessLookupError):  # children that outlived their parent
            os.killpg(pgid, signal.SIGKILL)

    def __enter__(self) -> LocalAirflow:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- REST API -------------------------------------------------------------------------------------------

    def password(self, user: str = "admin") -> str:
        """The generated password of the simple auth manager's user."""
        path = self.home / PASSWORDS_FILE
        text = path.read_text(encoding="utf-8").strip() if path.exists() else ""
        if not text:  # secure_home made it empty; Airflow fills it once its api-server starts
            raise AirflowError(f"{path} not written yet")
        try:
            return str(json.loads(text)[user])
        except (ValueError, KeyError, TypeError) as err:
            raise AirflowError(f"{path} holds no password for {user!r} yet") from err

    def token(self, user: str = "admin") -> str:
        if user not in self._tokens:
            response = httpx.post(
                f"{self.url}/auth/token",
                json={"username": user, "password": self.password(user)},
                timeout=10,
                verify=self.verify,
            )
            if response.status_code >= 300:
                raise AirflowError(f"token for {user}: HTTP {response.status_code} {response.text[:200]}")
            self._tokens[user] = str(response.json()["access_token"])
        return self._tokens[user]

    def api(
        self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201), user: str = "admin"
    ) -> Any:
        """One REST call to /api/v2 as ``user``; AirflowError on an unexpected status. A read that times out or
        loses its connection (an api-server starved by a busy machine) is tried again, up to three times; a write
        is not, since it may have been applied."""
        attempts = _READ_ATTEMPTS if method == "GET" else 1
        for attempt in range(1, attempts + 1):
            try:
                response = httpx.request(
                    method,
                    f"{self.url}/api/v2{path}",
                    json=body,
                    headers={"Authorization": f"Bearer {self.token(user)}"},
                    timeout=30,
                    verify=self.verify,
                )
                break
            except httpx.TransportError as err:
                if attempt == attempts:
                    raise AirflowError(f"{method} {path}: {type(err).__name__} after {attempt} attempt(s)") from err
                log.info("%s %s: %s; trying again (attempt %d of %d)", method, path, type(err).__name__,
                         attempt + 1, attempts)  # fmt: skip
        if response.status_code not in ok:
            raise AirflowError(f"{method} {path}: HTTP {response.status_code} {response.text[:500]}")
        return response.json() if response.content else None

    def wait_for_dag(self, dag_id: str, timeout_s: float = 120) -> None:
        """Until the dag-processor has parsed ``dag_id`` (a run can only be triggered then)."""
        _until(lambda: self.api("GET", f"/dags/{dag_id}", ok=(200, 404)).get("dag_id") == dag_id, timeout_s, dag_id)

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None) -> str:
        """Unpause and trigger a run with ``conf`` (the DAG's params); its run id."""
        self.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})
        now = datetime.now(UTC).isoformat()
        run = self.api("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": now, "conf": dict(conf or {})})
        return str(run["dag_run_id"])

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")["state"])

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        tis = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {str(t["task_id"]): str(t["state"]) for t in tis}

    def wait_for_run(self, dag_id: str, run_id: str, timeout_s: float) -> str:
        """Until the run finishes; its final state."""
        _until(lambda: self.run_state(dag_id, run_id) in FINISHED, timeout_s, f"run {run_id} to finish")
        return self.run_state(dag_id, run_id)

    def wait_for_approval(
        self, dag_id: str, run_id: str, task_id: str, timeout_s: float, settle_s: float = 2.0
    ) -> dict[str, Any]:
        """The approval's HITL detail once its task has waited ``settle_s``: an answer sooner races the task's
        own transition into awaiting_input and fails it (an Airflow 3.3 race)."""
        path = f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails"
        found: dict[str, Any] = {}

        def ready() -> bool:
            states = self.task_states(dag_id, run_id)
            failed = sorted(t for t, s in states.items() if s in ("failed", "upstream_failed"))
            if failed:
                raise AirflowError(f"run {run_id}: task(s) {', '.join(failed)} failed before the approval")
            if states.get(task_id) != "awaiting_input":
                return False
            detail = self.api("GET", path)
            created = datetime.fromisoformat(str(detail["created_at"]).replace("Z", "+00:00"))
            found.update(detail)
            return (datetime.now(UTC) - created).total_seconds() >= settle_s

        _until(ready, timeout_s, f"{task_id} of {run_id} to await input")
        return found

    def answer(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        options: list[str],
        params_input: Mapping[str, Any],
        user: str = "admin",
    ) -> dict[str, Any]:
        """Answer a waiting approval as ``user``, as its form would: every field the question asks, those not given
        with the value it asked with (the offer's digest among them, which publish checks)."""
        path = f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails"
        asked = self.api("GET", path, user=user).get("params") or {}
        form = {k: v.get("value") if isinstance(v, dict) else v for k, v in asked.items()}
        body = {"chosen_options": options, "params_input": {**form, **params_input}}
        return dict(self.api("PATCH", path, body, user=user))


_READ_ATTEMPTS = 3


def _until(condition: Any, timeout_s: float, what: str) -> None:
    wait_until(condition, timeout_s, what, poll_s=0.5, error=AirflowError)

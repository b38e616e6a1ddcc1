"""What a run writes to and connects to: free disk of the run and cache directories, a configured Ray cluster, a
tuning database. Nothing is started or left behind: a cluster is only connected to, a database only queried,
writability is probed with a temporary file that is removed at once."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from urllib.parse import urlsplit

from verl.diagnose.base import FAIL, PASS, Check, GiB, existing_ancestor, tail, writable

RAY_CLIENT_PORT, RAY_GCS_PORT = 10001, 6379


def check_disk(name: str, path: str, min_free_gb: float, holds: str, elsewhere: str) -> Check:
    """FAIL when the disk holding ``path`` (or, before it exists, its nearest existing parent) has less than
    ``min_free_gb`` GiB free, or when no file can be created there. ``holds``: what the directory is for;
    ``elsewhere``: the setting that moves it."""
    full = os.path.abspath(os.path.expanduser(path))
    probe = existing_ancestor(full)
    where = full if probe == full else f"{full} (not created yet; {probe} exists)"
    free = shutil.disk_usage(probe).free / GiB
    if not writable(probe):
        return Check(name, FAIL, f"{where} is not writable", f"make {probe} writable for this user, or {elsewhere}")
    if free < min_free_gb:
        return Check(
            name,
            FAIL,
            f"{free:.2f} GiB free at {where}, below the {min_free_gb:g} GiB minimum ({holds})",
            f"free space on the disk of {probe}, or {elsewhere}",
        )
    return Check(name, PASS, f"{free:.1f} GiB free at {where}")


def check_run_dir(run_dir: str, min_free_gb: float) -> Check:
    return check_disk(
        "disk.run",
        run_dir,
        min_free_gb,
        "checkpoints, logs and rollouts of runs go there",
        "write runs to another disk: trainer.default_local_dir=/bigger/disk/<project>/<experiment> "
        "(and check it with --run-dir /bigger/disk)",
    )


def check_cache_dir(cache_dir: str, min_free_gb: float) -> Check:
    return check_disk(
        "disk.cache",
        cache_dir,
        min_free_gb,
        "built-in datasets and tiny models are cached there; deleting it is safe",
        "move the cache to another disk: export VERL_CACHE_DIR=/bigger/disk/verl-cache",
    )


def _ray_endpoint(address: str) -> tuple[str, int] | str:
    """``(host, port)`` of a Ray address (``host:port``, ``ray://host[:port]``, ``auto``), or why there is none."""
    if address == "auto":
        try:
            from ray._private.services import find_gcs_addresses  # where `ray start` records a local head

            found = sorted(find_gcs_addresses())
        except Exception:  # private API of an unknown Ray version, or Ray missing
            found = []
        if not found:
            return "address 'auto': no running Ray cluster was found on this machine"
        address = found[0]
    parts = urlsplit(address if "://" in address else f"gcs://{address}")
    default = RAY_CLIENT_PORT if parts.scheme == "ray" else RAY_GCS_PORT
    try:
        return parts.hostname or "127.0.0.1", parts.port or default
    except ValueError as e:
        return f"address {address!r} is malformed: {e}"


def check_ray(address: str | None, connect: bool = False, timeout_s: float = 5.0) -> Check:
    """A configured cluster (``--ray-address`` or ``RAY_ADDRESS``) must answer on its port within ``timeout_s``;
    with ``connect`` (``--check-all``) ``ray.init(address=...)`` runs in a subprocess too, as the job would."""
    source = "--ray-address" if address else "RAY_ADDRESS"
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        return Check(
            "ray-cluster",
            PASS,
            "none configured (RAY_ADDRESS unset): trainer.backend=ray starts a local cluster in the run directory",
        )
    fix = (
        f"start the cluster (on its head node: ray start --head --port={RAY_GCS_PORT}) or correct the address "
        f"({source} / ray_init.address, e.g. <head-ip>:{RAY_GCS_PORT} or ray://<head-ip>:{RAY_CLIENT_PORT}); to "
        "run on a local cluster instead: unset RAY_ADDRESS"
    )
    endpoint = _ray_endpoint(address)
    if isinstance(endpoint, str):
        return Check("ray-cluster", FAIL, f"{endpoint} ({source})", fix)
    host, port = endpoint
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:
        return Check("ray-cluster", FAIL, f"{address} ({source}) is not reachable at {host}:{port}: {e}", fix)
    if not connect:
        return Check("ray-cluster", PASS, f"{address} ({source}) answers at {host}:{port}")
    code = (
        f"import json, ray; ray.init(address={address!r}, logging_level='ERROR', log_to_driver=False); "
        "print('RESOURCES', json.dumps(ray.cluster_resources()))"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return Check("ray-cluster", FAIL, f"ray.init(address={address!r}) did not connect within 120 s", fix)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESOURCES ")), None)
    if out.returncode != 0 or line is None:
        return Check(
            "ray-cluster",
            FAIL,
            f"{host}:{port} answers but ray.init(address={address!r}) failed:\n{tail(out.stderr + out.stdout, 6)}",
            fix + " (a version mismatch needs the cluster's Ray version here too: pip install ray[default]==<its>)",
        )
    import json

    res = json.loads(line.split(" ", 1)[1])
    return Check(
        "ray-cluster",
        PASS,
        f"{address} ({source}) connected: {res.get('CPU', 0):g} CPUs, {res.get('GPU', 0):g} GPUs",
    )


def hide_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@", 1)
    return url


def check_storage(url: str | None, timeout_s: int = 5) -> Check:
    """A tuning database (``verl tune --storage``): an RDB URL must accept a connection and ``SELECT 1``; an SQLite
    or journal file must be openable or creatable. Nothing is written."""
    if not url:
        return Check(
            "tune-storage",
            PASS,
            "none given (verl tune's default is sqlite:///<output-dir>/study.db; --storage URL checks a shared one)",
        )
    from verl.tune.storage import is_journal

    shown = hide_password(url)
    if is_journal(url):
        path = url.split(":", 1)[1] if url.startswith("journal:") else url
        return _check_file_storage(shown, path, is_sqlite=False)
    if "://" not in url:
        return _check_file_storage(shown, url, is_sqlite=True)
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[1] if ":///" in url else ""
        if not path or path == ":memory:":
            return Check(
                "tune-storage",
                FAIL,
                f"{shown} is an in-memory SQLite database: each tuner process would see its own empty study",
                "use a file: --storage sqlite:////abs/path/study.db",
            )
        return _check_file_storage(shown, path, is_sqlite=True)
    return _check_rdb(url, shown, timeout_s)


def _check_file_storage(shown: str, path: str, is_sqlite: bool) -> Check:
    full = os.path.abspath(os.path.expanduser(path))
    fix = f"point --storage at a writable file, e.g. sqlite:///{os.path.expanduser('~')}/verl-tune/study.db"
    if os.path.exists(full):
        if not os.access(full, os.R_OK | os.W_OK):
            return Check("tune-storage", FAIL, f"{shown}: {full} is not readable and writable", fix)
        if is_sqlite:
            try:
                with sqlite3.connect(f"file:{full}?mode=ro", uri=True, timeout=5.0) as db:
                    tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            except sqlite3.Error as e:
                return Check("tune-storage", FAIL, f"{shown}: {full} is not an SQLite database: {e}", fix)
            return Check("tune-storage", PASS, f"{shown}: SQLite file with {tables} tables, writable")
        return Check("tune-storage", PASS, f"{shown}: journal file, writable")
    parent = existing_ancestor(os.path.dirname(full))
    if not os.path.isdir(parent) or not writable(parent):
        return Check("tune-storage", FAIL, f"{shown}: cannot create {full} ({parent} is not a writable directory)", fix)
    return Check(
        "tune-storage", PASS, f"{shown}: {full} does not exist yet; {parent} is writable (verl tune creates it)"
    )


# the module SQLAlchemy imports for a dialect -> the pip package that provides it
DRIVER_PACKAGES = {
    "psycopg": '"psycopg[binary]"',
    "psycopg2": "psycopg2-binary",
    "pymysql": "pymysql",
    "MySQLdb": "mysqlclient",
}


def _driver_fix(module: str | None, url: str) -> str:
    fix = f"pip install {DRIVER_PACKAGES.get(module or '', module or 'the dialect driver')}"
    scheme = urlsplit(url).scheme
    if module == "psycopg" and scheme == "postgresql" and importlib.util.find_spec("psycopg2") is not None:
        # SQLAlchemy 2.1 maps a bare postgresql:// to psycopg 3; psycopg2 (what verl's test extra installs) is here
        return f"name the installed psycopg2 driver in the URL: {hide_password(url).replace('postgresql://', 'postgresql+psycopg2://', 1)} (or {fix})"
    if module == "MySQLdb" and scheme == "mysql":
        return f"{fix}, or use PyMySQL: pip install pymysql and write mysql+pymysql://..."
    return fix


def _check_rdb(url: str, shown: str, timeout_s: int) -> Check:
    try:
        import sqlalchemy
    except ModuleNotFoundError:
        return Check("tune-storage", FAIL, f"{shown}: SQLAlchemy is not installed", 'pip install "optuna>=4"')
    scheme = urlsplit(url).scheme
    connect_args = {"connect_timeout": timeout_s} if scheme.startswith(("postgresql", "mysql")) else {}
    try:
        engine = sqlalchemy.create_engine(url, connect_args=connect_args)
    except ModuleNotFoundError as e:
        return Check(
            "tune-storage", FAIL, f"{shown}: its database driver is not installed ({e})", _driver_fix(e.name, url)
        )
    except Exception as e:  # a malformed URL, an unknown dialect
        return Check("tune-storage", FAIL, f"{shown} is not a usable database URL: {e}", "fix the --storage URL")
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT 1"))
    except Exception as e:
        reason = " ".join(str(getattr(e, "orig", None) or e).split()[:40])
        return Check(
            "tune-storage",
            FAIL,
            f"cannot connect to {shown}: {reason}",
            f"start the database server or correct the URL {shown} (host, port, user, password, database): every "
            "tuner machine must reach it; to tune on this machine alone drop --storage (sqlite in the output dir)",
        )
    finally:
        engine.dispose()
    return Check("tune-storage", PASS, f"{shown}: connected ({engine.dialect.name})")

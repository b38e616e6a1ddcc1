"""Where a study lives: an Optuna RDB storage (SQLite, PostgreSQL, MySQL) or a journal file, opened so that
several tuner processes can share it and Optuna's heartbeat can find the trials of a tuner that died.

Heartbeat: an RDB storage opened with ``heartbeat_interval`` makes ``study.optimize`` record a heartbeat of each
running trial from a thread; before each new trial Optuna fails the RUNNING trials whose heartbeat is older than
``grace_period`` and calls the storage's stale-trial callback on each (ours queues it again, see
``verl.tune.recovery``). Optuna's journal storage has no heartbeat (``JournalStorage`` does not implement
``BaseHeartbeat`` in Optuna 5): there only the same-host check of ``verl.tune.recovery`` finds dead tuners.

A full disk: SQLite rolls the failed write back and a journal append that fails is cut back (`_WholeRecordsBackend`),
so the trials recorded before stay readable; `disk_full_error` turns the failure into one error naming the storage
and the fix (the tuner raises it from ``run_study``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import Any

from verl.utils.disk import DiskFullError, cause, free_bytes, human_bytes, is_disk_full


def default_storage(output_dir: str) -> str:
    return f"sqlite:///{os.path.abspath(os.path.join(output_dir, 'study.db'))}"


def is_journal(url: str) -> bool:
    """``journal:PATH``, or a bare ``*.log`` / ``*.journal`` path."""
    return url.startswith("journal:") or (url.endswith((".log", ".journal")) and "://" not in url)


def make_storage(
    url: str | None,
    output_dir: str,
    *,
    heartbeat_interval: float | None = None,
    grace_period: float | None = None,
    stale_trial_callback: Callable | None = None,
):
    """``sqlite:///path``, ``postgresql+psycopg2://user:pw@host/db``, ``mysql+pymysql://...`` (RDB) or ``journal:PATH`` (a
    journal file: several processes, or machines on one network file system, may share it); a bare path is an
    SQLite file. With ``heartbeat_interval`` an RDB storage gets Optuna's heartbeat: a trial without a heartbeat
    for ``grace_period`` seconds is failed and handed to ``stale_trial_callback`` (a journal storage has none)."""
    import optuna

    os.makedirs(output_dir, exist_ok=True)
    url = url or default_storage(output_dir)
    if is_journal(url):
        return _journal_storage(url.split(":", 1)[1] if url.startswith("journal:") else url)
    if "://" not in url:  # a bare path: an SQLite file, as the default is
        url = "sqlite:///" + os.path.abspath(os.path.expanduser(url))
    heartbeat = _heartbeat_kwargs(heartbeat_interval, grace_period, stale_trial_callback)
    if not url.startswith("sqlite"):
        return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True}, **heartbeat)
    if url.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(os.path.abspath(url[len("sqlite:///") :])) or ".", exist_ok=True)
    # sqlite3 starts a transaction only at the first write, so optuna's SELECT ... FOR UPDATE when a worker pops a
    # queued trial locks nothing: two workers both read WAITING and both run the trial (5 of 40 pops doubled with 4
    # processes). Taking the write lock at BEGIN serialises the read-then-write; other connections wait `timeout`.
    storage = optuna.storages.RDBStorage(
        url, engine_kwargs={"connect_args": {"timeout": 60, "isolation_level": None}}, **heartbeat
    )
    sqlite_begin_immediate(storage.engine)
    return storage


def _journal_storage(path: str):
    import optuna
    from optuna.storages.journal import JournalFileOpenLock

    path = os.path.abspath(os.path.expanduser(path))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return optuna.storages.JournalStorage(_whole_records_backend()(path, JournalFileOpenLock(path)))


def _whole_records_backend() -> type:
    """Optuna's journal file backend, but an append that fails (a full disk) is cut back to where it started, under
    the file's lock. Optuna's own leaves half a line, and the next record appended after it (once there is room)
    makes that line unreadable: the whole journal then fails to load."""
    from optuna.storages.journal import JournalFileBackend

    class _WholeRecordsBackend(JournalFileBackend):
        def __init__(self, path: str, lock):
            super().__init__(path, lock_obj=lock)
            self.path, self.lock = path, lock

        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            data = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs).encode()
            self.lock.acquire()
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    start = os.lseek(fd, 0, os.SEEK_END)
                    try:
                        written = 0
                        while written < len(data):
                            written += os.write(fd, data[written:])
                        os.fsync(fd)
                    except OSError:
                        os.ftruncate(fd, start)
                        raise
                finally:
                    os.close(fd)
            finally:
                self.lock.release()

    return _WholeRecordsBackend


def storage_file(url: str) -> str | None:
    """The file a ``sqlite:///`` or journal storage lives in; None for a database server."""
    if is_journal(url):
        return os.path.abspath(os.path.expanduser(url.split(":", 1)[1] if url.startswith("journal:") else url))
    if url.startswith("sqlite:///"):
        return os.path.abspath(url[len("sqlite:///") :])
    if "://" not in url:
        return os.path.abspath(os.path.expanduser(url))
    return None


def disk_full_error(url: str, error: BaseException, study: Any = None) -> DiskFullError | None:
    """The error a study ends with when writing its storage file failed on a full disk (None for any other error):
    the storage, the space left, the trials it still holds and the fix."""
    path = storage_file(url)
    if path is None or not is_disk_full(error, os.path.dirname(path)):
        return None
    held = ""
    if study is not None:
        try:
            states = [t.state.name for t in study.get_trials(deepcopy=False)]
            held = f" It still holds the {states.count('COMPLETE')} trials completed before ({len(states)} in all)."
        except Exception:  # reading may fail too: the message must not
            pass
    return DiskFullError(
        f"the study's storage {url} could not be written: no space left on the device of {path} "
        f"({human_bytes(free_bytes(path))} free; {cause(error)}).{held} A trial that was running when the write "
        "failed is queued again when the study resumes. Free space on that file system, or "
        f"move {os.path.basename(path)} to a disk with room and give its new place with --storage; then run the same "
        "command again to resume the study."
    )


def _heartbeat_kwargs(interval: float | None, grace_period: float | None, callback: Callable | None) -> dict[str, Any]:
    """RDBStorage's heartbeat arguments (whole seconds, as Optuna wants). Optuna 4.9 renamed ``failed_trial_callback``
    to ``heartbeat_stale_trial_callback`` (the old name warns and goes in Optuna 6): pass whichever it knows."""
    if interval is None:
        return {}
    import inspect

    import optuna

    kwargs: dict[str, Any] = {"heartbeat_interval": max(1, math.ceil(interval))}
    if grace_period is not None:
        kwargs["grace_period"] = max(1, math.ceil(grace_period))
    if callback is not None:
        params = inspect.signature(optuna.storages.RDBStorage).parameters
        name = (
            "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in params else "failed_trial_callback"
        )
        kwargs[name] = callback
    return kwargs


def sqlite_begin_immediate(engine) -> None:
    """Make every transaction on a pysqlite ``engine`` start with ``BEGIN IMMEDIATE`` (the SQLAlchemy recipe for
    serializable SQLite); the connection must be in autocommit mode (``isolation_level=None``) so that sqlite3 does
    not issue its own deferred BEGIN."""
    from sqlalchemy import event

    event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))

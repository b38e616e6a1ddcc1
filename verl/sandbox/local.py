"""Run untrusted code (a model's output) in a separate process that cannot reach the host: the local sandbox.

    result = run_code("print(input()[::-1])", stdin="abc", config=SandboxConfig(wall_timeout_s=5))
    result.status, result.stdout      # ("ok", "cba\\n")

Layers, each of which holds on its own:

1. **Namespaces (bubblewrap).** The code runs under ``bwrap --unshare-all``: its own PID, network (loopback only,
   nothing listening), IPC, UTS and mount namespaces. The file system it sees is the interpreter's directories
   read-only (``/usr`` and the interpreter's prefix, nothing of ``/root``, ``/home``, ``/etc`` or the repository),
   a fresh ``/proc`` and ``/dev``, an empty tmpfs ``/tmp``, and its private working directory ``/sandbox``, the only
   place it can write. When the sandbox's first process exits or is killed, the kernel kills every process left in
   its PID namespace, so a daemon cannot outlive the run.
2. **Resource limits** (``setrlimit`` before the interpreter starts, inherited by every child): CPU seconds, address
   space, file size, open files, no core files, and the number of processes.
3. **Another user.** Run as root, the sandbox drops to an unprivileged user id of its own (a fresh one per
   concurrent run, from ``sandbox_uid_base``): the process limit then counts only the sandbox's processes, the code
   cannot signal the trainer, and after the run every process of that user id is killed.
4. **Wall clock and output.** The host kills the whole process group at ``wall_timeout_s`` and when stdout + stderr
   pass ``max_output_bytes``; it keeps only the first ``max_output_bytes`` and returns the tails.

The sandbox fails closed: where bubblewrap cannot start (not installed, no user namespaces) a run raises
``SandboxUnavailable`` naming the cause and the fixes. Only an explicit ``isolation="rlimit"`` (the config's
``sandbox.isolation``, the server's ``--isolation``, or ``VERL_SANDBOX_ISOLATION=rlimit`` for the whole process) runs
with layers 2-4 alone, and says so with a warning. The threat model and what each layer stops: docs/security.md.
"""

from __future__ import annotations

import itertools
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any

from verl.utils.cpu_threads import thread_env
from verl.utils.process_kill import kill_until_gone

STATUSES = ("ok", "runtime_error", "syntax_error", "timeout", "memory", "output_limit", "killed", "sandbox_error")
ISOLATIONS = ("bwrap", "rlimit")
ISOLATION_ENV = "VERL_SANDBOX_ISOLATION"  # the process's default isolation (inherited by its children and workers)
SANDBOX_DIR = "/sandbox"  # the working directory as the code sees it under bubblewrap
# the runner compiles the code first, so a syntax error is told apart from a crash; its marker carries a per-run
# nonce in argv, and the code never runs when it is printed
_RUNNER = """import sys
src = open(sys.argv[1], encoding="utf-8").read()
try:
    code = compile(src, sys.argv[1], "exec")
except (SyntaxError, ValueError) as e:
    import traceback
    traceback.print_exc(limit=0)
    print(sys.argv[2], file=sys.stderr)
    sys.exit(2)
del src
sys.argv = [sys.argv[1]]
exec(code, {"__name__": "__main__", "__file__": sys.argv[0], "__builtins__": __builtins__})
"""


class SandboxUnavailable(RuntimeError):
    """Bubblewrap cannot isolate a run on this machine and resource limits alone were not chosen (the message names
    the cause and the fixes). Fatal for a job: reward managers let it through instead of scoring a failed sample."""


@dataclass
class SandboxConfig:
    """Limits and isolation of one run. Memory and time limits are per run; ``max_processes`` counts the run's
    processes and threads together."""

    # bwrap: namespaces + limits, or refuse to run; rlimit: resource limits only (no file or network isolation);
    # None: the process default (VERL_SANDBOX_ISOLATION, else bwrap)
    isolation: str | None = None
    wall_timeout_s: float = 10.0  # the whole run, start-up included; then every process of the run is killed
    cpu_time_s: int = 10  # CPU seconds (RLIMIT_CPU); all threads together
    memory_limit_mb: int = 1024  # address space (RLIMIT_AS) of each process
    max_processes: int = 64  # processes + threads (RLIMIT_NPROC, for the sandbox's own user id)
    max_file_size_mb: int = 16  # largest file the code may write (RLIMIT_FSIZE)
    max_open_files: int = 64  # RLIMIT_NOFILE
    max_output_bytes: int = 1 << 20  # stdout + stderr kept; more kills the run (status output_limit)
    python: str | None = None  # interpreter the code runs under; default: the system python3, else this one
    sandbox_uid_base: int = 2_000_000  # as root, runs use user ids from here (one per concurrent run)
    extra_ro_binds: list[str] = field(default_factory=list)  # more host paths the code may read (bubblewrap)

    def __post_init__(self) -> None:
        if self.isolation is not None:
            check_isolation(self.isolation, "sandbox isolation")
        for key in ("wall_timeout_s", "cpu_time_s", "memory_limit_mb", "max_processes", "max_output_bytes"):
            if getattr(self, key) <= 0:
                raise ValueError(f"sandbox {key} must be > 0, got {getattr(self, key)!r}")


@dataclass
class SandboxResult:
    """What happened: ``status`` is one of ``STATUSES``; ``stdout`` / ``stderr`` are the kept output (decoded,
    invalid bytes replaced); ``returncode`` is negative for a signal, None when the host killed the run."""

    status: str
    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float
    isolation: str  # what actually isolated this run: "bwrap" or "rlimit"

    def tail(self, n: int = 500) -> tuple[str, str]:
        """The last ``n`` characters of stdout and stderr (for logs and error observations)."""
        return self.stdout[-n:], self.stderr[-n:]


# ---------------------------------------------------------------- isolation probing and user ids

_probe_lock = threading.Lock()
_bwrap_ok: dict[tuple[str, bool], str | None] = {}  # (python, as_root) -> None if bwrap works, else why not
_uid_lock = threading.Lock()
_uids_in_use: set[int] = set()
_uid_counter = itertools.count()


def default_python() -> str:
    """The interpreter sandboxed code runs under: the system's python3 (readable by any user), else this one."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return getattr(sys, "_base_executable", None) or sys.executable


def _acquire_uid(base: int) -> int:
    with _uid_lock:
        while True:  # per process and run; the pid keeps two trainers on one machine apart
            uid = base + (os.getpid() % 4096) * 256 + next(_uid_counter) % 256
            if uid not in _uids_in_use:
                _uids_in_use.add(uid)
                return uid


def _release_uid(uid: int) -> None:
    with _uid_lock:
        _uids_in_use.discard(uid)


def _processes_of(uid: int) -> list[str]:
    """The ``/proc`` entries of ``uid``'s processes (a process that exits meanwhile is left out)."""
    entries = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    entries.append(entry)
            except OSError:
                continue
    return entries


def _live_processes_of(uid: int) -> list[int]:
    """Pids of ``uid``'s processes that can still run (zombies are dead already: only their parent can reap them)."""
    pids = []
    for entry in _processes_of(uid):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            pids.append(int(entry))
    return pids


def _kill_user_processes(uid: int) -> int:
    """SIGKILL every live process of ``uid`` (only ever a sandbox's own user id); returns how many were found."""
    return kill_until_gone(lambda: _live_processes_of(uid), passes=3, pause_s=0.02)


def _ro_binds(python: str, extra: list[str]) -> list[str]:
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(python)))
    binds = [] if prefix.startswith("/usr") else [prefix]
    for path in binds + list(extra):
        args += ["--ro-bind", path, path]
    return args


def _bwrap_command(python: str, workdir: str, extra: list[str], env: dict[str, str] | None = None) -> list[str]:
    settings = [arg for key, value in (env or {}).items() for arg in ("--setenv", key, value)]
    return [
        shutil.which("bwrap") or "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        *_ro_binds(python, extra),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--bind",
        workdir,
        SANDBOX_DIR,
        "--chdir",
        SANDBOX_DIR,
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/local/bin:/usr/bin:/bin",
        "--setenv",
        "HOME",
        SANDBOX_DIR,
        "--setenv",
        "LANG",
        "C.UTF-8",
        *settings,
        "--",
    ]


def bwrap_status(python: str | None = None) -> str | None:
    """None when bubblewrap can isolate a run on this machine, else the reason it cannot (cached)."""
    python = python or default_python()
    as_root = os.geteuid() == 0
    with _probe_lock:
        if (python, as_root) not in _bwrap_ok:
            if shutil.which("bwrap") is None:
                reason = "bubblewrap (bwrap) is not installed"
            else:
                config = SandboxConfig(wall_timeout_s=30, python=python)
                probe = run_code("print('ok')", None, config, isolation="bwrap")
                ok = probe.status == "ok" and probe.stdout.strip() == "ok"
                reason = None if ok else f"bwrap failed to start: {probe.stderr.strip()[-300:] or probe.status}"
            _bwrap_ok[(python, as_root)] = reason
        return _bwrap_ok[(python, as_root)]


# ---------------------------------------------------------------- one run


def _nproc_limit(config: SandboxConfig, uid: int | None) -> int:
    # the limit counts every task of the user id: a sandbox uid has none yet, this user has its own already
    return config.max_processes + (0 if uid is not None else _user_task_count(os.getuid()))


def _limit_command(config: SandboxConfig, uid: int | None) -> list[str] | None:
    """``prlimit ... -- [setpriv ... --]``: the run's resource limits and user id, applied by two small programs
    between the host and the sandbox, so the host starts the run with ``vfork`` (cheap at any size). A
    ``preexec_fn`` would instead make Python ``fork`` the trainer: page tables of gigabytes copied per run, measured
    at 117 ms per start in a 3 GB process against 0.7 ms. None when util-linux's tools are missing."""
    prlimit, setpriv = shutil.which("prlimit"), shutil.which("setpriv")
    if prlimit is None or (uid is not None and setpriv is None):
        return None
    mb, cpu, nproc = 1024 * 1024, config.cpu_time_s, _nproc_limit(config, uid)
    argv = [
        prlimit,
        f"--cpu={cpu}:{cpu + 1}",
        f"--as={config.memory_limit_mb * mb}",
        f"--fsize={config.max_file_size_mb * mb}",
        f"--nofile={config.max_open_files}",
        "--core=0",
        f"--nproc={nproc}",
        "--",
    ]
    if uid is not None:
        argv += [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    return argv


def _limits(config: SandboxConfig, uid: int | None):
    """The same limits as a ``preexec_fn`` (where util-linux's ``prlimit`` / ``setpriv`` are missing)."""

    def apply() -> None:  # in the child, before exec: async-signal-safe calls only
        mb = 1024 * 1024
        resource.setrlimit(resource.RLIMIT_CPU, (config.cpu_time_s, config.cpu_time_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (config.memory_limit_mb * mb, config.memory_limit_mb * mb))
        resource.setrlimit(resource.RLIMIT_FSIZE, (config.max_file_size_mb * mb, config.max_file_size_mb * mb))
        resource.setrlimit(resource.RLIMIT_NOFILE, (config.max_open_files, config.max_open_files))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    nproc = _nproc_limit(config, uid)
    return apply


def _user_task_count(uid: int) -> int:
    count = 0
    for entry in _processes_of(uid):
        try:
            count += len(os.listdir(f"/proc/{entry}/task"))
        except OSError:
            continue
    return count


def _collect(proc: subprocess.Popen, deadline: float, cap: int) -> tuple[bytes, bytes, str | None]:
    """Read stdout and stderr until both close; kill the run's process group at the deadline or past ``cap``."""
    out, err = bytearray(), bytearray()
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    reason = None
    while sel.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            reason = "timeout"
            break
        for key, _ in sel.select(timeout=min(left, 0.5)):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            key.data.extend(chunk)
            if len(out) + len(err) > cap:
                reason = "output_limit"
                break
        if reason:
            break
    sel.close()
    if reason:
        _kill_group(proc)
    return bytes(out[:cap]), bytes(err[:cap]), reason


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _signal_of(returncode: int | None) -> int | None:
    """The signal that ended the code: Popen reports -N; bubblewrap exits 128 + N for a signalled child."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    return returncode - 128 if 128 < returncode < 128 + 65 else None


def _classify(returncode: int | None, stderr: str, reason: str | None, nonce: str) -> str:
    if reason:
        return reason  # timeout, output_limit, sandbox_error
    if returncode == 2 and nonce in stderr:
        return "syntax_error"
    if returncode == 0:
        return "ok"
    if "MemoryError" in stderr or "Cannot allocate memory" in stderr:
        return "memory"
    sig = _signal_of(returncode)
    if sig == signal.SIGXCPU:
        return "timeout"  # past its CPU seconds
    if sig is not None:
        return "killed"
    return "runtime_error"


def run_files(
    files: dict[str, str],
    entry: str,
    args: list[str],
    stdin: str | None = None,
    config: SandboxConfig | None = None,
    isolation: str | None = None,
) -> tuple[int | None, str, str, str | None, float, str]:
    """Write ``files`` into a fresh private working directory and run ``python -I -B <entry> <args...>`` there, in
    the sandbox. ``args`` may name the files by relative path (the working directory is the current one). Returns
    ``(returncode, stdout, stderr, reason, wall_s, isolation)``: ``reason`` is "timeout" or "output_limit" when the
    host killed the run (then ``returncode`` is None). The building block of :func:`run_code` and the test-case
    runner; never raises for anything the code does."""
    config = config or SandboxConfig()
    python = config.python or default_python()
    isolation = isolation or resolve_isolation(config)
    start = time.monotonic()
    uid = _acquire_uid(config.sandbox_uid_base) if os.geteuid() == 0 else None
    workdir = tempfile.mkdtemp(prefix="verl-sandbox-")
    try:
        for name, text in files.items():
            with open(os.path.join(workdir, name), "w", encoding="utf-8") as f:
                f.write(text)
        os.chmod(workdir, 0o700)
        if uid is not None:
            for name in ["", *files]:
                os.chown(os.path.join(workdir, name), uid, uid)
        limit_command = _limit_command(config, uid)
        # one OpenMP thread, no long spin-wait: a program's numpy must not fight the trainer for the cores
        threads = thread_env(1)
        argv = list(limit_command or [])
        argv += _bwrap_command(python, workdir, config.extra_ro_binds, threads) if isolation == "bwrap" else []
        argv += [python, "-I", "-B", entry, *args]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "LANG": "C.UTF-8", **threads}
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=env,
                start_new_session=True,  # its own process group: the host kills the group
                preexec_fn=None if limit_command else _limits(config, uid),
                close_fds=True,
            )
        except OSError as e:
            return None, "", f"could not start the sandbox: {e}", "sandbox_error", 0.0, isolation
        threading.Thread(target=_feed, args=(proc, stdin), daemon=True).start()
        out, err, reason = _collect(proc, start + config.wall_timeout_s, config.max_output_bytes)
        try:
            returncode = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            returncode = proc.wait()
        stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        return (None if reason else returncode), stdout, stderr, reason, time.monotonic() - start, isolation
    finally:
        if uid is not None:
            _kill_user_processes(uid)  # anything that escaped the process group (rlimit-only runs)
            _release_uid(uid)
        shutil.rmtree(workdir, ignore_errors=True)


def _feed(proc: subprocess.Popen, stdin: str | None) -> None:
    try:
        if stdin:
            proc.stdin.write(stdin.encode("utf-8"))
        proc.stdin.close()
    except OSError:  # the code exited or closed stdin without reading it all
        pass


_warned = False


def check_isolation(value: Any, where: str) -> str:
    """``value`` if it names an isolation, else a ValueError naming ``where`` and the choices."""
    if value not in ISOLATIONS:
        removed = " ('auto' was removed: the sandbox no longer falls back silently; choose rlimit explicitly)"
        raise ValueError(
            f"{where} must be one of {list(ISOLATIONS)}, got {value!r}{removed if value == 'auto' else ''}"
        )
    return value


def default_isolation() -> str:
    """The isolation of a run whose config names none: ``VERL_SANDBOX_ISOLATION``, else "bwrap"."""
    return check_isolation(os.environ.get(ISOLATION_ENV) or "bwrap", ISOLATION_ENV)


def set_default_isolation(isolation: str | None, where: str = "sandbox.isolation") -> None:
    """Make ``isolation`` this process's default (``VERL_SANDBOX_ISOLATION``, which threads and child processes
    read too); None leaves the environment's. ``where`` names the setting in the error for a bad value."""
    if isolation is not None:
        os.environ[ISOLATION_ENV] = check_isolation(isolation, where)


RUNTIME_OPT_IN = f"sandbox.isolation=rlimit in the job's config, or {ISOLATION_ENV}=rlimit in its environment"


def unavailable_message(reason: str, opt_in: str = RUNTIME_OPT_IN) -> str:
    """The one error of a job or service that would run model-written code where bubblewrap cannot start."""
    return (
        f"model-written code cannot run isolated on this machine: {reason}. Fix: install bubblewrap "
        "(apt-get install bubblewrap; Fedora/RHEL: dnf install bubblewrap) with unprivileged user namespaces allowed; "
        f"or accept resource limits only, which leave this machine's files and network open to the code, with {opt_in} "
        "(docs/security.md)"
    )


RLIMIT_WARNING = (
    "SANDBOX WITHOUT ISOLATION (isolation=rlimit): model-written code runs with resource limits only; it can read "
    "this machine's files and reach its network. Install bubblewrap and drop the rlimit setting to contain it "
    "(docs/security.md)."
)


def warn_rlimit() -> None:
    """Once per process: runs are isolated by resource limits only, by the user's choice."""
    global _warned
    if not _warned:
        warnings.warn(
            RLIMIT_WARNING,
            RuntimeWarning,
            stacklevel=3,
        )
        _warned = True


def resolve_isolation(config: SandboxConfig | None = None, *, opt_in: str = RUNTIME_OPT_IN) -> str:
    """What isolates runs under ``config``: "bwrap" (the default) when bubblewrap starts here, "rlimit" when chosen
    explicitly (warned once per process). Raises ``SandboxUnavailable`` (naming the cause, the install and
    ``opt_in``, the way to accept rlimit on this surface) when bwrap is wanted and cannot start: the sandbox fails
    closed. Jobs and services that run model-written code call it once at start; each run calls it again (cached)."""
    config = config or SandboxConfig()
    wanted = config.isolation or default_isolation()
    if wanted == "rlimit":
        warn_rlimit()
        return "rlimit"
    reason = bwrap_status(config.python or default_python())
    if reason is not None:
        raise SandboxUnavailable(unavailable_message(reason, opt_in))
    return "bwrap"


def run_code(
    code: str, stdin: str | None = None, config: SandboxConfig | None = None, *, isolation: str | None = None
) -> SandboxResult:
    """Run Python ``code`` (fed ``stdin``) in the sandbox; never raises for anything the code does (only
    ``SandboxUnavailable`` when bubblewrap is wanted, the default, and cannot start here)."""
    nonce = uuid.uuid4().hex
    files = {"main.py": code, "_runner.py": _RUNNER}
    returncode, out, err, reason, wall, used = run_files(
        files, "_runner.py", ["main.py", nonce], stdin, config, isolation
    )
    status = _classify(returncode, err, reason, nonce)
    return SandboxResult(status, returncode, out, err.replace(nonce + "\n", "").replace(nonce, ""), wall, used)

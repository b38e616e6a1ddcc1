"""The escape catalogue: each attack, submitted as model output, ends as a failed result with no effect on the host.

The whole catalogue runs against the real local sandbox (bubblewrap + resource limits, as root: a sandbox user id of
its own), then the host is checked: the repository's files unchanged, nothing written outside the run, no process of
the runs left, the listening server never reached. Limits are small so the catalogue takes seconds.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import uuid

import pytest

from verl.sandbox import SandboxConfig, bwrap_status, run_code

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIMITS = dict(wall_timeout_s=6.0, cpu_time_s=2, memory_limit_mb=512, max_processes=32, max_output_bytes=1 << 16)
needs_bwrap = pytest.mark.skipif(
    bwrap_status() is not None, reason=f"bubblewrap cannot isolate here: {bwrap_status()} (apt-get install bubblewrap)"
)


def digest(paths: list[str]) -> dict[str, str]:
    return {p: hashlib.sha256(open(p, "rb").read()).hexdigest() for p in paths}


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if marker.encode() in open(f"/proc/{entry}/cmdline", "rb").read():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def scratch_dirs() -> set[str]:
    import tempfile

    return {d for d in os.listdir(tempfile.gettempdir()) if d.startswith("verl-sandbox-")}


class Listener:
    """A real TCP server on 127.0.0.1 that records every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()
            except OSError:
                continue

    def close(self) -> None:
        self.stop = True
        self.thread.join()
        self.sock.close()


def catalogue(tmp_path, port: int, marker: str) -> dict[str, tuple[str, set[str]]]:
    """name -> (code, statuses that count as contained). None of them may end "ok" with the attack's effect."""
    outside = tmp_path / "written-by-the-sandbox.txt"
    repo_file = os.path.join(ROOT, "README.md")
    return {
        "read the repository": (f"print(open({repo_file!r}).read()[:200])", {"runtime_error"}),
        "read /root": ("import os; print(os.listdir('/root'))", {"runtime_error"}),
        "read /etc/shadow": ("print(open('/etc/shadow').read())", {"runtime_error"}),
        "write outside its dir": (
            f"open({str(outside)!r}, 'w').write('pwned')\nopen({repo_file!r}, 'a').write('pwned')",
            {"runtime_error"},
        ),
        "connect to 127.0.0.1": (
            f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2).send(b'hi')",
            {"runtime_error"},
        ),
        "fork bomb": ("import os\nwhile True:\n    os.fork()", {"runtime_error", "timeout", "killed"}),
        "allocate 10 GB": ("x = bytearray(10 * 2**30)\nprint(len(x))", {"memory"}),
        "infinite loop": ("while True:\n    pass", {"timeout"}),
        "busy threads": (
            "import threading\n"
            "def spin():\n    while True:\n        pass\n"
            "for _ in range(8):\n    threading.Thread(target=spin).start()",
            {"timeout"},
        ),
        "100 MB of output": ("import sys\nsys.stdout.write('x' * 100_000_000)", {"output_limit"}),
        "kill the trainer": (f"import os, signal\nos.kill({os.getpid()}, signal.SIGKILL)", {"runtime_error"}),
        "kill its parent": ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nwhile True: pass", None),
        "daemon outliving the run": (
            "import os, sys, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])\n"
            "    os._exit(0)\n"
            "time.sleep(0.5)\nprint('parent done')",
            {"ok"},  # it may exit cleanly: what matters is that the daemon is gone afterwards
        ),
        "ctypes segfault": ("import ctypes\nctypes.string_at(0)", {"killed"}),
    }


@pytest.mark.slow
@needs_bwrap
def test_the_catalogue_is_contained_and_the_host_is_untouched(tmp_path):
    marker = f"verl-escape-{uuid.uuid4().hex}"
    watched = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "pyproject.toml")]
    before = digest(watched)
    dirs_before = scratch_dirs()
    server = Listener()
    try:
        results = {}
        for name, (code, contained) in catalogue(tmp_path, server.port, marker).items():
            result = run_code(code, config=SandboxConfig(**LIMITS))
            results[name] = result
            assert result.isolation == "bwrap"
            if contained is not None:
                assert result.status in contained, (name, result)
            assert result.wall_s < LIMITS["wall_timeout_s"] + 5, (name, result.wall_s)
    finally:
        server.close()
    # what each attack reached: nothing
    assert "# verl" not in results["read the repository"].stdout
    assert "PermissionError" in results["read /root"].stderr or "FileNotFoundError" in results["read /root"].stderr
    assert len(results["100 MB of output"].stdout) <= LIMITS["max_output_bytes"]
    # the host afterwards
    assert server.accepted == 0
    assert digest(watched) == before
    assert not (tmp_path / "written-by-the-sandbox.txt").exists()
    assert processes_with(marker) == []
    assert scratch_dirs() == dirs_before  # every run's working directory removed


@needs_bwrap
def test_ordinary_programs_run_with_stdin_and_say_what_happened():
    ok = run_code("import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))", stdin="1 2 3\n")
    assert (ok.status, ok.returncode, ok.stdout) == ("ok", 0, "6\n")
    syntax = run_code("def f(:\n    pass")
    assert syntax.status == "syntax_error" and "SyntaxError" in syntax.stderr
    crash = run_code("raise ValueError('boom')")
    assert crash.status == "runtime_error" and crash.tail()[1].rstrip().endswith("ValueError: boom")
    exit3 = run_code("import sys; sys.exit(3)")
    assert (exit3.status, exit3.returncode) == ("runtime_error", 3)
    # its own directory is writable and private to the run
    scratch = run_code("open('out.txt', 'w').write('x' * 10)\nimport os\nprint(sorted(os.listdir('.')))")
    assert scratch.status == "ok" and "out.txt" in scratch.stdout


@pytest.mark.slow
def test_without_bwrap_the_sandbox_fails_closed_and_rlimit_is_an_explicit_choice(without_bwrap, monkeypatch):
    """No bubblewrap on the PATH (a fresh machine): the default refuses with the cause and both fixes; only
    isolation=rlimit (a config, or VERL_SANDBOX_ISOLATION for the process) runs, warns once, and says so."""
    import verl.sandbox.local as local

    with pytest.raises(local.SandboxUnavailable) as refused:
        run_code("print('hi')")
    message = str(refused.value)
    assert "bubblewrap (bwrap) is not installed" in message and "apt-get install bubblewrap" in message
    assert "sandbox.isolation=rlimit" in message and "VERL_SANDBOX_ISOLATION=rlimit" in message
    with pytest.raises(local.SandboxUnavailable):
        run_code("print('hi')", config=SandboxConfig(isolation="bwrap"))
    with pytest.warns(RuntimeWarning, match="SANDBOX WITHOUT ISOLATION"):
        result = run_code("print('hi')", config=SandboxConfig(isolation="rlimit"))
    assert (result.status, result.stdout, result.isolation) == ("ok", "hi\n", "rlimit")
    # the resource limits still hold without namespaces
    loop = run_code("while True:\n    pass", config=SandboxConfig(isolation="rlimit", cpu_time_s=1, wall_timeout_s=5))
    assert loop.status == "timeout" and loop.isolation == "rlimit"
    monkeypatch.setenv(local.ISOLATION_ENV, "rlimit")  # the process-wide choice (what sandbox.isolation sets)
    assert run_code("print(2)").isolation == "rlimit"
    monkeypatch.setenv(local.ISOLATION_ENV, "auto")
    with pytest.raises(ValueError, match="VERL_SANDBOX_ISOLATION must be one of.*'auto' was removed"):
        run_code("print(3)")


def test_bad_limits_are_named():
    with pytest.raises(ValueError, match="sandbox isolation must be one of"):
        SandboxConfig(isolation="docker")
    with pytest.raises(ValueError, match="sandbox wall_timeout_s must be > 0"):
        SandboxConfig(wall_timeout_s=0)


@needs_bwrap
def test_programs_run_one_thread_under_the_wait_policy(monkeypatch):
    """A program's numpy / torch runs one OpenMP thread with the trainer's short spin-wait (verl.utils.cpu_threads):
    it must not fight the trainer for the cores."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    code = "import os\nprint([os.environ.get(k) for k in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'GOMP_SPINCOUNT')])"
    for isolation in ("bwrap", "rlimit"):
        result = run_code(code, config=SandboxConfig(isolation=isolation))
        assert result.stdout.strip() == "['1', '1', '1000']", (isolation, result)

"""The sandbox server as a shared service, safely: start it on a port with an API key, call it with verl's
SandboxFusion client (the key from VERL_SANDBOX_API_KEY), show that a caller without the key is refused, stop it.

    python examples/sandbox/secure_sandbox_server.py              # needs bubblewrap: apt-get install bubblewrap
    python examples/sandbox/secure_sandbox_server.py --isolation rlimit   # resource limits only (docs/security.md)

A trainer uses the same service with ``reward_model.sandbox_fusion.url=http://HOST:PORT/run_code`` and the key in
``VERL_SANDBOX_API_KEY``. Listening beyond 127.0.0.1 (``--host 0.0.0.0``) is refused without ``--api-key``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request

from verl.utils.reward_score.sandbox_fusion import call_sandbox_api


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--isolation", default="bwrap", choices=["bwrap", "rlimit"])
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = secrets.token_urlsafe(24)
    env = {**os.environ, "VERL_SANDBOX_API_KEY": key}  # the server reads it, and so does the client below
    cmd = [sys.executable, "-m", "verl.sandbox.server", "--port", str(port), "--isolation", args.isolation]
    server = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            if server.poll() is not None:  # e.g. no bubblewrap: the server says why and exits
                print(server.stderr.read().strip(), file=sys.stderr)
                return server.returncode
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    print(f"health: {r.read().decode()}")
                    break
            except OSError:
                time.sleep(0.1)
        os.environ["VERL_SANDBOX_API_KEY"] = key
        response, error = call_sandbox_api(url + "/run_code", "print(sum(range(10)))", None, 5, 5, 256)
        print(f"with the key: stdout {response['run_result']['stdout']!r}, isolation {response['isolation']}")
        del os.environ["VERL_SANDBOX_API_KEY"]
        response, error = call_sandbox_api(url + "/run_code", "print(1)", None, 5, 5, 256)
        print(f"without it: {error}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())

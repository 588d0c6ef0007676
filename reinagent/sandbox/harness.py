"""The program that runs *inside* the sandbox: it executes untrusted code.

It is passed to the interpreter with `-c` and imports nothing from reinagent (inside bubblewrap
the package is not even visible). The job arrives as one length-prefixed marshal frame on stdin.
Two ways of running:

- tests (the model's own internal tests, Reflexion's feedback): the program and its tests run
  here, and the verdict is one line `<nonce><json>` written to the saved stdout. This verdict is
  *untrusted feedback*: a program in the same interpreter can forge it (replace `_run` through
  `sys.modules`, find the nonce with `sys._getframe`, return an object whose `__eq__` is always
  true). It only ever shapes the feedback the model reads.
- serve (the benchmark's hidden tests): the program is loaded, then each request frame names a
  function and carries plain arguments; the function's result goes back over the saved stdout
  as tagged JSON of plain built-in values (see reinagent/sandbox/wire.py). The hidden tests and
  their assertions run on the trusted side, which trusts nothing it reads here but plain values.

Start-up time is most of a run's cost, so the harness imports only built-in modules.

The serve mode's functions live in harness_serve.py; reinagent/sandbox/process.py sends the two
files as one source (harness_serve.py first, so that this file's `main()` call comes last).
"""

import marshal
import os
import resource
import signal
import sys

# Bound now: the program shares this interpreter and could monkeypatch the modules' attributes.
_getpid, _exit, _write = os.getpid, os._exit, os.write
_exec, _compile, _eval, _repr, _type, _ord = exec, compile, eval, repr, type, ord
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _json(value):
    """JSON text of None/bool/int/str/list/dict, ASCII only."""
    kind = _type(value)
    if value is None or kind is bool:
        return {None: "null", True: "true", False: "false"}[value]
    if kind is int:
        return "%d" % value
    if kind is list or kind is tuple:
        return "[" + ",".join([_json(v) for v in value]) + "]"
    if kind is dict:
        return "{" + ",".join([_json(k) + ":" + _json(v) for k, v in value.items()]) + "}"
    out = []
    for ch in "%s" % (value,):
        code = _ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 32 <= code < 127:
            out.append(ch)
        elif code > 0xFFFF:  # outside the BMP: a UTF-16 surrogate pair, as JSON wants
            code -= 0x10000
            out.append("\\u%04x\\u%04x" % (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)))
        else:
            out.append("\\u%04x" % code)
    return '"' + "".join(out) + '"'


STARTED = "!started"  # on the started pipe: the harness is contained and about to run the program


class _TestTimeout(BaseException):
    """Raised by the alarm; a BaseException so that `except Exception` in user code misses it."""


_WALL = [5.0]  # the wall-clock backstop, as a multiple of a CPU limit (the spec's wall_factor)
_FIRED = [None]  # which clock ended the last timed run: SIGPROF (CPU) or SIGALRM (wall)


def _on_alarm(signum, frame):
    _FIRED[0] = signum
    raise _TestTimeout()


def _arm(seconds):
    """A time limit on the CPU this process spends (user + system, every thread), so that a
    machine busy with other work (a model generating beside the judge) cannot turn a right
    program into a timeout; and a wall-clock backstop for a program that waits instead of
    computing (sleep, a blocked read)."""
    _FIRED[0] = None
    signal.setitimer(signal.ITIMER_PROF, max(seconds, 0.01))
    signal.setitimer(signal.ITIMER_REAL, max(seconds * _WALL[0], 0.01))


def _disarm():
    signal.setitimer(signal.ITIMER_PROF, 0)
    signal.setitimer(signal.ITIMER_REAL, 0)


def _timeout_message(seconds):
    if _FIRED[0] == signal.SIGALRM:
        return "timed out: %.1f s of wall time (%g x the limit) without using %.1f s of CPU" % (seconds * _WALL[0], _WALL[0], seconds)
    return "timed out after %.1f s of CPU time" % seconds


def _describe(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    return text if len(text) <= 500 else text[:500] + "..."


def _actual_value(test, ns, seconds, main_pid):
    """For a failed `assert X == Y`, the repr of X: the feedback Reflexion shows the model."""
    import ast  # only when a test failed: most runs never pay for it

    try:
        node = ast.parse(test).body[0]
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
            return None
        cmp = node.test
        if len(cmp.ops) != 1 or not isinstance(cmp.ops[0], ast.Eq):
            return None
        code = _compile(ast.Expression(cmp.left), "<test>", "eval")
    except SyntaxError:
        return None
    _arm(seconds)
    try:
        text = _repr(_eval(code, ns))
    except BaseException:  # noqa: BLE001 - best effort only
        text = None
    finally:
        _disarm()
    if _getpid() != main_pid:
        _exit(0)
    if text is not None and len(text) > 300:
        text = text[:300] + "..."
    return text


def _run(source, name, ns, seconds, main_pid):
    """Execute one piece of code under a CPU-time limit (`_arm`). Returns (kind, message): kind
    'ok' on success."""
    _arm(seconds)
    try:
        _exec(_compile(source, name, "exec"), ns)
        kind, message = "ok", ""
    except _TestTimeout:
        kind, message = "timeout", _timeout_message(seconds)
    except AssertionError as exc:
        kind, message = "failed", ("AssertionError: %s" % exc) if str(exc) else "AssertionError"
    except MemoryError:
        kind, message = "memory", "MemoryError: memory limit exceeded"
    except SystemExit as exc:
        kind, message = "exit", "called sys.exit(%r) before the tests finished" % (exc.code,)
    except BlockingIOError as exc:
        kind, message = "crash", "process limit reached: %s" % exc
    except RecursionError as exc:
        kind, message = "failed", _describe(exc)
    except BaseException as exc:  # noqa: BLE001 - any error of untrusted code is a result
        kind, message = "failed", _describe(exc)
    finally:
        _disarm()
    if _getpid() != main_pid:
        _exit(0)  # a forked child of the program must never report
    return kind, message


def _drop_privileges(spec):
    drop = spec.get("drop")
    if not drop:
        return
    for path in drop.get("chown", []):
        os.chown(path, drop["uid"], drop["gid"])
    for path in drop.get("chmod_tmp", []):
        os.chmod(path, 0o1777)
    remapped = _open_import_dirs() if drop.get("remap_path") else None
    os.setgroups([])
    os.setgid(drop["gid"])
    os.setuid(drop["uid"])
    if os.getuid() != drop["uid"] or os.geteuid() != drop["uid"]:
        os._exit(121)
    if remapped is not None:
        _use_import_dirs(remapped)


def _open_import_dirs():
    """sys.path as /proc/self/fd/N links to directories opened while still root.

    In "uid" mode the interpreter may live where the sandbox uid cannot go (a pyenv under
    /root, mode 0700). A directory opened beforehand stays usable through the process's own
    fd links, which resolve without walking the forbidden parents: imports keep working and
    nothing else under that parent becomes visible.
    """
    links = {}
    for path in sys.path:
        try:
            links[path] = "/proc/self/fd/%d" % os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            pass
    return links


def _use_import_dirs(links):
    sys.path[:] = [links.get(path, path) for path in sys.path]
    # Packages imported at start-up (collections, encodings, ...) find their submodules
    # through their own __path__, which still names the original directories.
    for module in list(sys.modules.values()):
        search = getattr(module, "__path__", None)
        if type(search) is not list:
            continue
        for i, entry in enumerate(search):
            for old, new in links.items():
                if entry == old or entry.startswith(old + "/"):
                    search[i] = new + entry[len(old):]
                    break
    sys.path_importer_cache.clear()


def _set_limits(limits):
    for name, (soft, hard) in limits.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))


def _read_exact(fd, size):
    chunks = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read_frame(fd):
    head = _read_exact(fd, 4)
    if head is None:
        return None
    return _read_exact(fd, int.from_bytes(head, "big"))


def _write_all(fd, data):
    while data:
        data = data[_write(fd, data):]


def _flush_streams():
    """os._exit drops what the program printed last: flush, but never hang on a replaced stream."""
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed or replaced stream
                pass
    except BaseException:  # noqa: BLE001 - the alarm
        pass
    signal.setitimer(signal.ITIMER_REAL, 0)


def _die_with_parent(spec, prctl):
    """Outside bubblewrap (which has --die-with-parent): SIGKILL when the framework dies.

    Set after the uid drop, which clears it; a parent already gone by then means exit now."""
    if prctl is None:
        return
    prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    if os.getppid() != spec["parent_pid"]:
        _exit(1)


def main():
    spec = marshal.loads(_read_frame(0))
    prctl = None
    if spec.get("parent_pid"):
        import ctypes  # only in the weak modes: bubblewrap needs no prctl

        prctl = ctypes.CDLL(None).prctl
    if spec.get("serve"):
        request_fd = os.dup(0)  # kept aside, like the report fd below
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    report_fd = os.dup(1)  # kept aside: the program may close or replace stdout
    if spec.get("serve"):
        os.dup2(2, 1)  # the program's prints go with its stderr, away from the replies
    main_pid = _getpid()
    _drop_privileges(spec)
    _die_with_parent(spec, prctl)
    _set_limits(spec["limits"])
    _WALL[0] = spec.get("wall_factor", _WALL[0])
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGPROF, _on_alarm)
    # Contained, about to run the program: said on a pipe of the framework's, closed before any
    # untrusted code runs. Once it is out, a 121 exit or a "bwrap:" line is the program's doing
    # (a crash), never the sandbox failing to start (an infrastructure error).
    started_fd = spec.pop("started_fd", None)
    if started_fd is not None:
        _write(started_fd, STARTED.encode("ascii"))
        os.close(started_fd)
    if spec.get("serve"):
        _serve(spec, request_fd, report_fd)  # harness_serve.py's, sent in front of this file
        _flush_streams()
        _exit(0)
    nonce = spec.pop("nonce")
    signal.signal(signal.SIGALRM, _on_alarm)
    ballast = bytearray(8 << 20)  # freed on MemoryError so that the report can still be built

    report = {"compile_error": None, "setup": None, "tests": []}
    # A real module named "solution" (not "__main__"): `if __name__ == "__main__":` demo blocks
    # stay quiet, and dataclasses/pickle find the module in sys.modules.
    module = type(sys)("solution")
    sys.modules["solution"] = module
    ns = module.__dict__
    per_test = spec["test_timeout_s"]
    try:
        compile(spec["code"], "solution.py", "exec")
    except SyntaxError as exc:
        report["compile_error"] = "SyntaxError: %s (line %s)" % (exc.msg, exc.lineno)
    except BaseException as exc:  # noqa: BLE001 - e.g. ValueError for null bytes
        report["compile_error"] = _describe(exc)
    if report["compile_error"] is None:
        kind, message = _run(spec["code"], "solution.py", ns, per_test, main_pid)
        if kind == "memory":
            ballast = None
            ns.clear()
        report["setup"] = [kind, message]
        if kind == "ok":
            for i, test in enumerate(spec["tests"]):
                kind, message = _run(test, "test_%d.py" % i, ns, per_test, main_pid)
                if kind == "memory":
                    ballast = None
                    ns.clear()  # the program's globals may hold the memory; release it first
                    report["tests"].append([kind, message, None])
                    break
                actual = None
                if kind == "failed" and spec.get("explain"):
                    actual = _actual_value(test, ns, per_test, main_pid)
                report["tests"].append([kind, message, actual])
                if kind in ("timeout", "exit", "crash") and spec.get("stop_on_fatal", True):
                    break
    del ballast
    _flush_streams()
    data = ("\n" + nonce + _json(report) + "\n").encode("ascii")
    while data:
        data = data[_write(report_fd, data):]
    _exit(0)  # skip atexit handlers and non-daemon threads the program may have left


if __name__ == "__main__":  # run with `python -c <this source>`; importing it does nothing
    main()

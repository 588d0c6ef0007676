"""The program that runs *inside* the sandbox: it executes untrusted code and its tests.

It is passed to the interpreter with `-c` and imports nothing from reinagent (inside bubblewrap
the package is not even visible). The job arrives marshalled on stdin, so the per-run nonce
never appears in a file or on the command line that the untrusted code could read. The verdict
is one line `<nonce><json>` written to the saved stdout after the tests: a program that exits
early (`sys.exit(0)`, `os._exit(0)`) or prints a fake success line never produces it.

Start-up time is most of a run's cost, so the harness imports only built-in modules: marshal
for the job (trusted, from the parent) and a small JSON writer for the report (the parent
parses it with json, never unmarshalling anything the program could have written).

A determined program running in the same interpreter can still fish the nonce out of memory
(gc introspection); the harness defends against accidents and simple tricks, while containment
(namespaces, uid, limits) defends the machine.
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


class _TestTimeout(BaseException):
    """Raised by the alarm; a BaseException so that `except Exception` in user code misses it."""


def _on_alarm(signum, frame):
    raise _TestTimeout()


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
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        text = _repr(_eval(code, ns))
    except BaseException:  # noqa: BLE001 - best effort only
        text = None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if _getpid() != main_pid:
        _exit(0)
    if text is not None and len(text) > 300:
        text = text[:300] + "..."
    return text


def _run(source, name, ns, seconds, main_pid):
    """Execute one piece of code under an alarm. Returns (kind, message): kind 'ok' on success."""
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        _exec(_compile(source, name, "exec"), ns)
        kind, message = "ok", ""
    except _TestTimeout:
        kind, message = "timeout", "timed out after %.1f s" % seconds
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
        signal.setitimer(signal.ITIMER_REAL, 0)
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


def main():
    spec = marshal.loads(sys.stdin.buffer.read())
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    nonce = spec.pop("nonce")
    report_fd = os.dup(1)  # kept aside: the program may close or replace stdout
    main_pid = _getpid()
    _drop_privileges(spec)
    _set_limits(spec["limits"])
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
    signal.setitimer(signal.ITIMER_REAL, 1.0)  # a replaced stream's flush() must not hang us
    try:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()  # os._exit below would drop what the program printed last
            except Exception:  # noqa: BLE001 - a closed or replaced stream
                pass
    except BaseException:  # noqa: BLE001 - the alarm
        pass
    signal.setitimer(signal.ITIMER_REAL, 0)
    data = ("\n" + nonce + _json(report) + "\n").encode("ascii")
    while data:
        data = data[_write(report_fd, data):]
    _exit(0)  # skip atexit handlers and non-daemon threads the program may have left


if __name__ == "__main__":  # run with `python -c <this source>`; importing it does nothing
    main()

"""The harness's serve mode (the benchmark's hidden tests), run *inside* the sandbox.

Not a module of its own at run time: reinagent/sandbox/process.py puts this file's source in front
of harness.py's and runs the two as one program, so the names below marked as harness.py's are
that file's module globals (bound before any untrusted code runs). Imported as a module (by the
tests or a linter), it defines functions only.

The program is loaded, then each request frame names a function and carries plain arguments; the
function's result goes back as tagged JSON of plain built-in values (see reinagent/sandbox/wire.py).
The hidden tests and their assertions run on the trusted side, which trusts nothing it reads here.
"""

import marshal
import sys

# From harness.py, resolved when these functions run: _arm, _compile, _describe, _disarm, _exec,
# _exit, _getpid, _read_frame, _timeout_message, _TestTimeout, _type, _write_all.

_SEQ_TAGS = {list: "l", tuple: "t", set: "S", frozenset: "F"}
# Standard-library dicts whose == against a dict is dict equality: they cross as their items.
_DICT_NAMES = ("Counter", "OrderedDict", "defaultdict")


def _encode(value, out):
    """Tagged JSON of a plain value (see wire.py); anything else crosses as its bool() only.

    The trusted side re-checks every node: this side's checks only make honest values arrive
    intact and dishonest ones arrive as what they are (an opaque object)."""
    kind = _type(value)
    if value is None:
        out.append("null")
    elif kind is bool:
        out.append("true" if value else "false")
    elif kind is int:
        out.append('["i","%x"]' % value)
    elif kind is float:
        out.append('["f","%s"]' % _float_hex(value))
    elif kind is complex:
        out.append('["c","%s","%s"]' % (_float_hex(value.real), _float_hex(value.imag)))
    elif kind is str:
        out.append('["s","%s"]' % value.encode("utf-8", "surrogatepass").hex())
    elif kind is bytes:
        out.append('["b","%s"]' % value.hex())
    elif kind in _SEQ_TAGS:
        out.append('["%s",[' % _SEQ_TAGS[kind])
        for i, item in enumerate(list(value)):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]]")
    elif kind is dict or (kind.__module__ == "collections" and kind.__name__ in _DICT_NAMES):
        out.append('["d",[')
        for i, (key, item) in enumerate(list(dict.items(value))):
            if i:
                out.append(",")
            _encode(key, out)
            out.append(",")
            _encode(item, out)
        out.append("]]")
    else:
        try:
            truth = "true" if value else "false"
        except BaseException:  # noqa: BLE001 - a __bool__ that raises: no truth value crosses
            truth = "null"
        name = ("%s" % kind.__name__).encode("utf-8", "replace").hex()
        out.append('["o","%s",%s]' % (name, truth))


_float_hex = float.hex


def _reply(fd, text):
    data = text.encode("ascii")
    _write_all(fd, len(data).to_bytes(4, "big") + data)


def _error_reply(fd, seq, kind, message):
    if len(message) > 500:
        message = message[:500] + "..."
    _reply(fd, '["e",%d,"%s","%s"]' % (seq, kind, message.encode("utf-8", "replace").hex()))


def _call(fn, args, kwargs, fd, seq, ballast, seconds):
    """Call fn under a CPU-time limit of `seconds` (harness.py's `_arm`) and send its result (or
    why there is none). Returns False to stop serving."""
    try:
        _arm(seconds)
        try:
            value = fn(*args, **kwargs)
        finally:
            _disarm()
        out = ['["r",%d,' % seq]
        _encode(value, out)
        out.append("]")
        _reply(fd, "".join(out))
        return True
    except MemoryError:
        ballast.clear()
        _error_reply(fd, seq, "memory", "MemoryError: memory limit exceeded")
    except RecursionError as exc:
        _error_reply(fd, seq, "raised", _describe(exc))
        return True
    except SystemExit as exc:
        _error_reply(fd, seq, "exit", "called sys.exit(%r)" % (exc.code,))
    except BlockingIOError as exc:
        _error_reply(fd, seq, "crash", "process limit reached: %s" % exc)
    except _TestTimeout:
        _error_reply(fd, seq, "timeout", _timeout_message(seconds))
    except Exception as exc:  # noqa: BLE001 - the program raised: that call failed
        _error_reply(fd, seq, "raised", _describe(exc))
        return True
    except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt and the like
        _error_reply(fd, seq, "crash", _describe(exc))
    return False


def _serve(spec, request_fd, reply_fd):
    """Load the program, then answer call requests until stdin closes."""
    main_pid = _getpid()
    ballast = [bytearray(8 << 20)]  # freed on MemoryError so that a reply can still be built
    module = type(sys)("solution")
    sys.modules["solution"] = module
    ns = module.__dict__
    try:
        code = _compile(spec["code"], "solution.py", "exec")
    except SyntaxError as exc:
        _error_reply(reply_fd, 0, "syntax", "SyntaxError: %s (line %s)" % (exc.msg, exc.lineno))
        return
    except BaseException as exc:  # noqa: BLE001 - e.g. ValueError for null bytes
        _error_reply(reply_fd, 0, "syntax", _describe(exc))
        return
    per_call = spec["call_cpu_s"]
    if not _call(lambda: _exec(code, ns), (), {}, reply_fd, 0, ballast, per_call):
        return
    while True:
        frame = _read_frame(request_fd)
        if frame is None:
            return
        seq, name, args, kwargs = marshal.loads(frame)
        fn = ns.get(name)
        if fn is None or not callable(fn):
            _error_reply(reply_fd, seq, "raised", "NameError: the program defines no function %r" % name)
        elif not _call(fn, args, kwargs, reply_fd, seq, ballast, per_call):
            return
        if _getpid() != main_pid:
            _exit(0)  # a forked child of the program returned into this loop

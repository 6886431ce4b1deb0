# lessonprobe's Python session driver: runs a document's `>>>` blocks through this interpreter's
# own doctest module, one namespace for the whole document, in the order the blocks arrive.
# Protocol: one JSON request a line on stdin ({"kind": "session"|"code", "text", "name", "flags",
# "filename", "offset"}), one JSON reply a line on the stdout it started with
# ({"attempted": N, "failures": [{"line": L, "report": doctest's text, "want_line", "want_lines",
# "got"}], "error": null|str}). `channels` comes from channels.py, prepended to this text.
import doctest
import json
import os
import sys
import traceback


class Runner(doctest.DocTestRunner):
    """doctest's runner, keeping each failure's document line and doctest's own report."""

    def __init__(self, optionflags=0):
        super().__init__(verbose=False, optionflags=optionflags)
        self.found = []

    def _keep(self, test, example, report, got):
        text = []
        report(text.append)
        line = test.lineno + example.lineno + 1
        if not self.optionflags & doctest.DONT_ACCEPT_BLANKLINE:
            got = "".join(
                "<BLANKLINE>\n" if not l.strip() else l for l in got.splitlines(True)
            )
        self.found.append({
            "line": line,
            "report": "".join(text),
            # Where the example's expected output is, and what bless writes there.
            "want_line": line + example.source.count("\n"),
            "want_lines": example.want.count("\n"),
            "got": got,
        })

    def report_failure(self, out, test, example, got):
        self._keep(
            test,
            example,
            lambda w: super(Runner, self).report_failure(w, test, example, got),
            got,
        )

    def report_unexpected_exception(self, out, test, example, exc_info):
        exception = "".join(traceback.format_exception_only(exc_info[0], exc_info[1]))
        self._keep(
            test,
            example,
            lambda w: super(Runner, self).report_unexpected_exception(w, test, example, exc_info),
            "Traceback (most recent call last):\n  ...\n" + exception,
        )


def session(request, namespace):
    parser = doctest.DocTestParser()
    try:
        test = parser.get_doctest(
            request["text"], namespace, request["name"], request["filename"], request["offset"]
        )
    except ValueError as e:
        return {"attempted": 0, "failures": [], "error": "doctest cannot read this block: %s" % e}
    # doctest copies the globals it is given; the document's blocks share one namespace.
    test.globs = namespace
    flags = 0
    for name in request.get("flags", []):
        flag = doctest.OPTIONFLAGS_BY_NAME.get(name.lstrip("+-"))
        if flag is None:
            return {"failures": [], "error": "unknown doctest option %r" % name}
        if not name.startswith("-"):
            flags |= flag
    runner = Runner(flags)
    result = runner.run(test, out=lambda text: None, clear_globs=False)
    return {"attempted": result.attempted, "failures": runner.found, "error": None}


def code(request, namespace):
    source = "\n" * request["offset"] + request["text"]
    try:
        exec(compile(source, request["filename"], "exec"), namespace)
    except BaseException:
        kind, value, tb = sys.exc_info()
        # The driver's own frame is no part of the document's traceback.
        tb = tb.tb_next if tb is not None else None
        line = request["offset"] + 1
        for frame in traceback.extract_tb(tb):
            if frame.filename == request["filename"] and frame.lineno:
                line = frame.lineno
        if isinstance(value, SyntaxError) and value.filename == request["filename"] and value.lineno:
            line = value.lineno
        report = "".join(traceback.format_exception(kind, value, tb))
        return {"attempted": 1, "failures": [{"line": line, "report": report}], "error": None}
    return {"attempted": 1, "failures": [], "error": None}


def main():
    requests, replies = channels()
    namespace = {"__name__": "__main__"}
    for line in requests:
        request = json.loads(line)
        try:
            if request["kind"] == "session":
                reply = session(request, namespace)
            else:
                reply = code(request, namespace)
        except BaseException as e:  # the driver itself failed: say so, keep serving
            reply = {"attempted": 0, "failures": [], "error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.flush()
        sys.stderr.flush()
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


main()

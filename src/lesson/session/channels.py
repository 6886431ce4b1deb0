# The JSON-line channels of lessonprobe's Python drivers (prepended to each driver's text).
import os


def channels():
    """The driver's requests (the stdin it started with) and replies (its stdout), after which
    fds 0 and 1 are /dev/null and stderr: what the code it runs prints outside any capture (a
    subprocess, os.write, a kernel it starts) goes to stderr, never into the replies, and
    input() reads nothing."""
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    return requests, replies

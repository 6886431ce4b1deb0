# lessonprobe's notebook driver: runs a notebook's code cells in order in one Jupyter kernel through
# nbclient (the executor nbval, nbmake and nbconvert use), as a student's "Run All". It imports
# nbclient before its request comes, so lessonprobe can start it ahead of its notebook. Protocol:
# one JSON request on stdin ({"kernel", "cwd", "path" (the kernel's PYTHONPATH, or null),
# "startup_timeout", "interrupt_grace" (seconds), "cells": [{"source", "timeout" (seconds),
# "skip"}]}), then one JSON line per event on the stdout it started with: {"started": PGID} once the
# kernel answers (or {"failed": why}), then per cell {"outputs": [...]} or {"skipped": true},
# {"timeout": seconds, "interrupted": answered} or {"dead": why}. A cell over its limit interrupts
# the kernel (Jupyter's Interrupt, as nbval does): when the kernel answers within interrupt_grace
# the later cells run in it; else it is killed and nothing more comes, as after a death. Closing
# stdin kills the kernel and ends the driver. `channels` comes from the session driver's
# channels.py, prepended to this text.
import asyncio
import json
import os
import queue
import signal
import sys
import threading
import time


# How often a kernel's start is tried before the notebook is reported as not started.
START_ATTEMPTS = 3


def say(replies, message):
    replies.write(json.dumps(message) + "\n")
    replies.flush()


def kill_group(pgid):
    if pgid:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass


def kernel_group(client):
    provisioner = getattr(client.km, "provisioner", None)
    pgid = getattr(provisioner, "pgid", None) or getattr(provisioner, "pid", None)
    return int(pgid) if pgid else None


def watch_stdin(requests, state):
    # lessonprobe holds our stdin open while it wants us; EOF means it is gone or done.
    requests.read()
    kill_group(state.get("pgid"))
    os._exit(1)


def imported():
    """nbclient and nbformat, imported before the request comes (lessonprobe starts a driver
    ahead of its notebook); the ImportError when they are missing."""
    try:
        global nbformat, NotebookClient, CellTimeoutError, DeadKernelError, run_sync, ensure_async
        global Ready
        import nbformat
        from jupyter_client.asynchronous import AsyncKernelClient
        from nbclient import NotebookClient
        from nbclient.exceptions import CellTimeoutError, DeadKernelError
        from nbclient.util import ensure_async, run_sync
    except ImportError as e:
        return e

    class Ready(AsyncKernelClient):
        """jupyter_client's client, ready once the kernel answers kernel_info on the shell
        channel and its IOPub channel is connected (jupyter_client's own wait, less its last
        step: waiting for 0.2 s of silence on IOPub to drop the status messages of that
        request, a fixed pause at each notebook's start; nbclient takes only the messages of
        the cell it runs, so they cannot reach a cell)."""

        async def wait_for_ready(self, timeout=None):
            until = time.monotonic() + (timeout or float("inf"))
            while True:
                self.kernel_info()
                try:
                    reply = await ensure_async(self.shell_channel.get_msg(timeout=1))
                except queue.Empty:
                    reply = None
                if reply is not None and reply["msg_type"] == "kernel_info_reply":
                    try:
                        await ensure_async(self.iopub_channel.get_msg(timeout=0.2))
                    except queue.Empty:
                        pass  # IOPub not connected yet: ask again
                    else:
                        self._handle_kernel_info_reply(reply)
                        return
                if not await self._async_is_alive():
                    raise RuntimeError("Kernel died before replying to kernel_info")
                if time.monotonic() > until:
                    raise RuntimeError("Kernel didn't respond in %d seconds" % timeout)

    return None


async def interrupted(client, grace):
    """Interrupts the kernel running a cell over its limit: whether the cell's execution ended
    within `grace` seconds. nbclient gave up waiting for its reply, and the cell is the only
    request under way, so the next execute_reply on the shell channel is the cell's (its late
    outputs on iopub name it as their parent: the next cell's reader passes over them)."""
    # nbclient leaves the timed-out cell's IOPub reader running (a CellTimeoutError is one of its
    # control signals, which it does not cancel the reader for); left, it would read on beside
    # the next cell's reader and drop the messages not of its cell, the next cell's outputs and
    # error among them, which would then pass without them.
    for task in asyncio.all_tasks():
        if task is not asyncio.current_task() and \
                task.get_coro().__qualname__.endswith("_async_poll_output_msg"):
            task.cancel()
    try:
        await ensure_async(client.km.interrupt_kernel())
    except Exception:
        return False
    until = time.monotonic() + grace
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return False
        try:
            message = await ensure_async(client.kc.shell_channel.get_msg(timeout=left))
        except queue.Empty:
            return False
        if message["msg_type"] == "execute_reply":
            return True


def run(request, replies, state, missing):
    if missing is not None:
        say(replies, {"failed": "%s (the kernel needs ipykernel and nbclient)" % missing})
        return
    cells = [nbformat.v4.new_code_cell(c["source"]) for c in request["cells"]]
    limits = {id(cell): c["timeout"] for cell, c in zip(cells, request["cells"])}
    nb = nbformat.v4.new_notebook(
        cells=cells,
        metadata={"kernelspec": {"name": request["kernel"], "display_name": request["kernel"]}},
    )
    client = NotebookClient(
        nb,
        kernel_name=request["kernel"],
        allow_errors=True,
        timeout_func=lambda cell: limits.get(id(cell)),
        interrupt_on_timeout=False,
        startup_timeout=request["startup_timeout"],
        resources={"metadata": {"path": request["cwd"]}},
        record_timing=False,
    )
    # jupyter_client picks the kernel's five ports, releases them and lets the kernel bind
    # them: another process may take one meanwhile and the kernel dies at its start
    # (jupyter/jupyter_client#276). As its maintainers suggest, a start that failed so is tried
    # again with fresh ports; a kernel that is not installed is not.
    from jupyter_client.kernelspec import NoSuchKernel
    for attempt in range(START_ATTEMPTS):
        try:
            client.km = client.create_kernel_manager()
            client.km.client_factory = Ready
            client.start_new_kernel(cwd=request["cwd"], env=kernel_env(request))
            state["pgid"] = kernel_group(client)
            client.start_new_kernel_client()
            break
        except BaseException as e:
            kill_group(state.pop("pgid", None))
            if isinstance(e, NoSuchKernel) or attempt + 1 == START_ATTEMPTS:
                say(replies, {"failed": "the kernel %r did not start: %s: %s" % (request["kernel"], type(e).__name__, e)})
                return
    say(replies, {"started": state["pgid"]})
    try:
        for index, (cell, asked) in enumerate(zip(cells, request["cells"])):
            if asked["skip"]:
                say(replies, {"skipped": True})
                continue
            try:
                client.execute_cell(cell, index)
            except CellTimeoutError:
                answered = run_sync(interrupted)(client, request["interrupt_grace"])
                say(replies, {"timeout": asked["timeout"], "interrupted": answered,
                              "outputs": cell.outputs})
                if not answered:
                    return
                continue
            except DeadKernelError as e:
                say(replies, {"dead": str(e) or "the kernel died", "outputs": cell.outputs})
                return
            say(replies, {"outputs": cell.outputs})
    finally:
        stop(client, state.get("pgid"))


def kernel_env(request):
    """The kernel's environment: the driver's, with the notebook's PYTHONPATH (the course's
    code, in the notebook's copy) when it has one. Given with the request, not in the driver's
    environment, so a driver started ahead serves any notebook."""
    env = dict(os.environ)
    if request.get("path"):
        env["PYTHONPATH"] = request["path"]
    return env


def stop(client, pgid):
    """Kills the kernel's process group and reaps the kernel, then lets jupyter_client remove
    its connection file: its own shutdown kills the kernel too, then polls every 0.1 s until the
    kernel is gone, a pause at each notebook's end."""
    kill_group(pgid)
    process = getattr(getattr(client.km, "provisioner", None), "process", None)
    if process is not None:
        try:
            process.wait(timeout=5)
        except BaseException:
            pass
    try:
        run_sync(client.km.shutdown_kernel)(now=True)
    except BaseException:
        pass


def main():
    requests, replies = channels()
    missing = imported()
    line = requests.readline()
    if not line:  # a driver started ahead that no notebook took: lessonprobe has ended
        os._exit(0)
    request = json.loads(line)
    state = {}
    threading.Thread(target=watch_stdin, args=(requests, state), daemon=True).start()
    try:
        run(request, replies, state, missing)
    except BaseException as e:  # the driver itself failed: say so
        kill_group(state.get("pgid"))
        say(replies, {"failed": "%s: %s" % (type(e).__name__, e)})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


main()

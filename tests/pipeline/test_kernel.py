"""rt_lib.pipeline.kernel: the runner's kernel client finds a message whose wake-up was lost."""

import asyncio
import time
from queue import Empty

import pytest
import zmq
import zmq.asyncio
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session

from rt_lib.pipeline import kernel
from rt_lib.pipeline.kernel import PatientKernelManager, SlicedPollChannel, SlicedPollKernelClient


async def _reply_after_a_lost_wakeup(channel_class: type, timeout: float) -> str:
    """A reply arrives while the channel polls, and its wake-up is lost: the socket's events are
    read through another handle before the event loop sees the file descriptor."""
    ctx = zmq.asyncio.Context()
    ours, peer = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    try:
        peer.connect(f"tcp://127.0.0.1:{ours.bind_to_random_port('tcp://127.0.0.1')}")
        session = Session()
        channel = channel_class(ours, session)
        task = asyncio.ensure_future(channel.get_msg(timeout=None))
        for _ in range(5):  # the task runs up to its poll, which waits on the descriptor
            await asyncio.sleep(0)
        assert not task.done()
        session.send(peer, "execute_reply", {"status": "ok"})
        # Without running the loop: wait until the reply is delivered, reading the socket's
        # events through another handle, which drains the descriptor's edge (the lost wake-up).
        events, deadline = zmq.Socket.shadow(ours.underlying), time.monotonic() + 60
        while not events.get(zmq.EVENTS) & zmq.POLLIN:
            assert time.monotonic() < deadline, "the reply was never delivered"
            time.sleep(0.01)
        try:
            msg = await asyncio.wait_for(task, timeout)
        except TimeoutError:
            return "no reply"
        return msg["msg_type"]
    finally:
        ours.close(0)
        peer.close(0)
        ctx.term()


def test_a_reply_whose_wakeup_was_lost_is_read_at_the_next_slice(monkeypatch):
    monkeypatch.setattr(kernel, "POLL_SLICE", 0.1)
    # read at the next slice; the bound is only there to end a test that would hang
    assert asyncio.run(_reply_after_a_lost_wakeup(SlicedPollChannel, 60.0)) == "execute_reply"
    # the case is real: jupyter_client's own channel, as nbclient uses it, waits on (no wake-up
    # will come however long it waits: one second shows it as well as a minute)
    assert asyncio.run(_reply_after_a_lost_wakeup(AsyncZMQSocketChannel, 1.0)) == "no reply"


def test_a_timeout_still_ends_the_wait_with_empty(monkeypatch):
    monkeypatch.setattr(kernel, "POLL_SLICE", 0.1)

    async def wait() -> float:
        ctx = zmq.asyncio.Context()
        sock = ctx.socket(zmq.PAIR)
        sock.bind_to_random_port("tcp://127.0.0.1")
        start = time.monotonic()
        try:
            with pytest.raises(Empty):
                await SlicedPollChannel(sock, Session()).get_msg(timeout=0.35)
            return time.monotonic() - start
        finally:
            sock.close(0)
            ctx.term()

    # at its timeout, not before; the upper bound only ends a wait that would never end (a
    # loaded machine may take seconds to run the loop again)
    assert 0.35 <= asyncio.run(wait()) < 60


def test_the_manager_gives_the_sliced_client_after_nbclient_sets_its_own_class():
    manager = PatientKernelManager()
    manager.client_class = "jupyter_client.asynchronous.AsyncKernelClient"  # as nbclient does
    client = manager.client()
    assert isinstance(client, SlicedPollKernelClient)
    assert client.shell_channel_class is SlicedPollChannel
    assert client.iopub_channel_class is SlicedPollChannel


async def _start_and_run(km: PatientKernelManager, code: str) -> str:
    """Start ``km``'s kernel, run ``code`` and return the text of its result."""
    await km.start_kernel()
    client = km.client()
    client.start_channels()
    try:
        reply = await client.execute_interactive(code, timeout=60, output_hook=lambda msg: None,
                                                 user_expressions={"out": code})
        return reply["content"]["user_expressions"]["out"]["data"]["text/plain"]
    finally:
        client.stop_channels()
        await km.shutdown_kernel(now=True)


def test_a_kernel_whose_port_is_taken_starts_again_on_fresh_ports():
    """The race two notebooks started together can lose, made certain: the kernel is handed a
    shell port another socket holds, dies binding it, and the manager starts it again."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        km = PatientKernelManager(kernel_name="python3")
        km.cache_ports = False  # the port set here is used, not one from jupyter_client's cache
        km.shell_port = taken.getsockname()[1]
        assert asyncio.run(_start_and_run(km, "6 * 7")) == "42"
        assert km.shell_port not in (0, taken.getsockname()[1])
    finally:
        taken.close()


def test_a_kernel_that_never_starts_is_named_after_its_tries(monkeypatch):
    monkeypatch.setattr(kernel, "START_TRIES", 2)
    km = PatientKernelManager(kernel_name="python3")
    km.kernel_spec.argv = [*km.kernel_spec.argv[:1], "-c", "import sys; sys.exit(3)"]
    with pytest.raises(RuntimeError, match="did not start in 2 tries: Kernel died"):
        asyncio.run(km.start_kernel())


def _one_kernel(queue, barrier) -> None:
    barrier.wait(timeout=120)  # a stuck sibling fails the test, it does not hang it
    try:
        queue.put(asyncio.run(_start_and_run(PatientKernelManager(kernel_name="python3"),
                                             "'answered'")))
    except Exception as err:  # noqa: BLE001 - reported to the test
        queue.put(f"{type(err).__name__}: {err}")


def test_kernels_started_side_by_side_all_answer():
    """Six processes start a kernel each at the same moment, as the runner's notebook processes
    do: every kernel answers."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    queue, barrier = ctx.Queue(), ctx.Barrier(6)
    procs = [ctx.Process(target=_one_kernel, args=(queue, barrier)) for _ in range(6)]
    for proc in procs:
        proc.start()
    answers = [queue.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    assert answers == ["'answered'"] * 6


def test_nbvals_kernels_start_again_when_one_dies():
    """The test command's own kernels (nbval's start function, wrapped by conftest.py) get the
    same retries: a first start that dies is followed by one that answers."""
    from nbval import kernel as nbval_kernel

    from rt_lib.pipeline.kernel import retrying

    real, calls = nbval_kernel.start_new_kernel, []

    def flaky(**kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise RuntimeError("Kernel died before replying to kernel_info")
        return real(**kwargs)

    km, kc = retrying(flaky)(kernel_name="python3", startup_timeout=60)
    try:
        assert len(calls) == 2 and km.is_alive()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    with pytest.raises(RuntimeError, match="did not start in 5 tries"):
        retrying(lambda **kw: (_ for _ in ()).throw(RuntimeError("Kernel died")))()

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
        await asyncio.sleep(0.1)
        task = asyncio.ensure_future(channel.get_msg(timeout=None))
        await asyncio.sleep(0.05)  # the poll waits on the descriptor
        session.send(peer, "execute_reply", {"status": "ok"})
        time.sleep(0.1)  # delivered, the loop not yet run
        zmq.Socket.shadow(ours.underlying).get(zmq.EVENTS)  # drains the descriptor's edge
        try:
            msg = await asyncio.wait_for(task, timeout)
        except asyncio.TimeoutError:
            return "no reply"
        return msg["msg_type"]
    finally:
        ours.close(0)
        peer.close(0)
        ctx.term()


def test_a_reply_whose_wakeup_was_lost_is_read_at_the_next_slice(monkeypatch):
    monkeypatch.setattr(kernel, "POLL_SLICE", 0.1)
    assert asyncio.run(_reply_after_a_lost_wakeup(SlicedPollChannel, 2.0)) == "execute_reply"
    # the case is real: jupyter_client's own channel, as nbclient uses it, waits on
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

    assert 0.35 <= asyncio.run(wait()) < 2.0


def test_the_manager_gives_the_sliced_client_after_nbclient_sets_its_own_class():
    manager = PatientKernelManager()
    manager.client_class = "jupyter_client.asynchronous.AsyncKernelClient"  # as nbclient does
    client = manager.client()
    assert isinstance(client, SlicedPollKernelClient)
    assert client.shell_channel_class is SlicedPollChannel
    assert client.iopub_channel_class is SlicedPollChannel

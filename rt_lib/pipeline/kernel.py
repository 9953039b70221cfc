"""The Jupyter kernel client the runner executes notebooks with: one that cannot miss a reply.

papermill runs a notebook through nbclient, which waits for each cell's ``execute_reply`` with one
``poll`` of the shell socket for the whole cell timeout (none in ``./run_all.sh``; 15 minutes in a
smoke test), and for the cell's outputs with one ``poll`` of the IOPub socket.  A zmq socket's
file descriptor is edge-triggered: a wake-up can be lost, and then a message that has arrived sits
in the socket while the poll waits on.  Seen here in notebook 01's widget cell (paper profile,
smoke test, ipykernel 6.31 and 7.4): the kernel had run the cell and sat idle, and the reply
was read only when the cell timeout ended the poll and nbclient polled again (ipykernel 7 also
loses requests on its side, ipython/ipykernel#1554; nbclient#312 reports the hang with widgets).

:class:`PatientKernelManager` hands nbclient a client whose channels poll in slices of
:data:`POLL_SLICE` seconds: each new poll asks the socket for waiting messages before it waits,
so a lost wake-up costs at most one slice.

Its kernels also start again when a start loses its ports.  jupyter_client picks a kernel's five
ports by asking the OS for free ones and releasing them for the kernel to bind; two notebooks
starting side by side in two processes can be handed the same port, and the second kernel dies
with ``ZMQError: Address already in use`` (seen in a test of two notebooks started together).
:meth:`PatientKernelManager.start_kernel` waits for each kernel to answer, and starts one that
died, or never answered, again on fresh ports, up to :data:`START_TRIES` times.
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any

from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.manager import AsyncKernelManager
from traitlets import Type

#: Seconds one poll of a channel waits before it asks the socket again.
POLL_SLICE = 1.0
#: Starts of one kernel before giving up (each on fresh ports), and the seconds each may take to
#: answer (a kernel imports numpy and matplotlib when it starts: seconds on a busy 2-core machine).
START_TRIES = 5
READY_TIMEOUT = 120.0
PORTS = ("shell_port", "iopub_port", "stdin_port", "hb_port", "control_port")


class SlicedPollChannel(AsyncZMQSocketChannel):
    """A channel whose ``get_msg`` polls in slices of at most :data:`POLL_SLICE` seconds, up to
    ``timeout`` (None: until a message comes), then raises :class:`queue.Empty` as before."""

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        assert self.socket is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = POLL_SLICE if deadline is None else deadline - time.monotonic()
            if await self.socket.poll(int(max(0.0, min(POLL_SLICE, left)) * 1000)):
                return await self._recv()
            if deadline is not None and time.monotonic() >= deadline:
                raise Empty


class SlicedPollKernelClient(AsyncKernelClient):
    """nbclient's asynchronous client with :class:`SlicedPollChannel` for shell and IOPub."""

    shell_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]
    iopub_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]


class PatientKernelManager(AsyncKernelManager):
    """Give to papermill as ``kernel_manager_class``: its clients are
    :class:`SlicedPollKernelClient` (nbclient sets ``client_class`` to its own after creating the
    manager, so the factory is fixed here, when the client is made)."""

    def client(self, **kwargs: Any) -> AsyncKernelClient:
        self.client_factory = SlicedPollKernelClient
        return super().client(**kwargs)

    async def start_kernel(self, **kw: Any) -> None:
        """Start the kernel and wait until it answers; one that dies first (a port taken between
        its choice and its bind) or does not answer in :data:`READY_TIMEOUT` seconds is shut down
        and started again on fresh ports."""
        errors = []
        for _ in range(START_TRIES):
            await super().start_kernel(**kw)
            client = self.client()
            client.start_channels()
            try:
                await client.wait_for_ready(timeout=READY_TIMEOUT)
                return
            except RuntimeError as err:  # "Kernel died before replying", "didn't respond"
                errors.append(str(err))
            finally:
                client.stop_channels()
            # as a restart does (the manager's zmq context and provisioner stay), but with the
            # connection file gone and the ports at 0: the next start asks the OS for new ones
            await self.shutdown_kernel(now=True, restart=True)
            self.cleanup_connection_file()
            for name in PORTS:
                setattr(self, name, 0)
        raise RuntimeError(f"the kernel did not start in {START_TRIES} tries: {'; '.join(errors)}")


def retrying(start_new_kernel: Any) -> Any:
    """``start_new_kernel`` (nbval's: how the test command starts each notebook's kernel) tried
    up to :data:`START_TRIES` times, each with a new manager and so new ports: two test workers
    start kernels side by side as the runner's notebooks do.  ``conftest.py`` installs it."""

    def start(**kwargs: Any) -> tuple[Any, Any]:
        errors = []
        for _ in range(START_TRIES):
            try:
                return start_new_kernel(**kwargs)
            except RuntimeError as err:  # "Kernel died before replying", "didn't respond"
                errors.append(str(err))
        raise RuntimeError(f"the kernel did not start in {START_TRIES} tries: "
                           f"{'; '.join(errors)}")

    return start

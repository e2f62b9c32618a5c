"""The byte relay of the fakes that stand between a client and a server (the forwarding proxy's CONNECT tunnels,
the Label Studio forwarder a test cuts): standard library only."""
from __future__ import annotations

import socket


def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy bytes from ``src`` to ``dst`` until either side ends, then end both: a shutdown first (unlike a
    close, it wakes the thread pumping the other way out of its ``recv``), then a close."""
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

#!/usr/bin/env python3
"""Stand-in for QEMU's virtio-serial chardev in the channel tests.

    channel_relay.py GUEST_SOCKET HOST_SOCKET

In production QEMU listens on the channel's host-side socket
(<source mode='bind'/>) and the guest sees a port device.  Here the guest's
memgrantd connects to GUEST_SOCKET (providers.channel.path) and
memgrant-host --socket connects to HOST_SOCKET; the relay copies bytes both
ways for one host client at a time.  When the host client leaves, the guest
connection is closed too: the guest's end of a socket path sees the host go
away the way a virtio port reports POLLHUP, and reconnects.  Bytes the guest
writes while no host is there wait in the socket buffer, stale, as they would
in the port: the host's sync must discard them.  Started by root, the relay
gives GUEST_SOCKET to the group memgrant (mode 0660) when there is one, as
the packages' udev rule gives the port device: memgrantd's agent, which runs
as the user memgrant, may then connect.
"""
import grp
import os
import select
import socket
import sys


def listen(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(4)
    return s


def pump(a, b):
    while True:
        r, _, _ = select.select([a, b], [], [])
        for src in r:
            dst = b if src is a else a
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                return
            try:
                dst.sendall(data)
            except OSError:
                return


def give_to_agent(path):
    """GROUP="memgrant", MODE="0660", as packaging/udev/60-memgrant.rules."""
    if os.geteuid() != 0:
        return
    try:
        gid = grp.getgrnam("memgrant").gr_gid
    except KeyError:
        return
    os.chown(path, -1, gid)
    os.chmod(path, 0o660)


def main():
    guest_l = listen(sys.argv[1])
    give_to_agent(sys.argv[1])
    host_l = listen(sys.argv[2])
    while True:
        host, _ = host_l.accept()
        guest, _ = guest_l.accept()
        pump(host, guest)
        host.close()
        guest.close()


if __name__ == "__main__":
    main()

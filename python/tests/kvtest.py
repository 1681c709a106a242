"""Helpers of the kvlane Python tests (imported by the tests and by peer.py)."""
import random
import time

import kvlane


def pattern(seed, n):
    """n deterministic bytes for `seed` (the same in every process)."""
    return random.Random(seed).randbytes(n)


def first_mismatch(got, want):
    """Index of the first differing byte, or -1 (a readable assert message)."""
    if bytes(got) == bytes(want):
        return -1
    if len(got) != len(want):
        return min(len(got), len(want))
    return next(i for i, (x, y) in enumerate(zip(got, want)) if x != y)


def make_pair(transport, **options):
    """Agents "a" and "b" in this process that may use only `transport`."""
    a = kvlane.Agent("a", transports=[transport], **options)
    b = kvlane.Agent("b", transports=[transport], **options)
    return a, b


def connect(frm, to):
    """Loads `to`'s current metadata into `frm` (again after `to` registers)."""
    assert frm.load_peer(to.export_metadata()) == to.name


def register_pair(a, b, src, dst):
    """Registers `src` with `a` and `dst` with `b`, then connects `a` to `b`."""
    ra, rb = a.register_memory(src), b.register_memory(dst)
    connect(a, b)
    return ra, rb


def write_transfer(a, b, src, dst):
    """A WRITE of all of `src` (registered with `a`) into `dst` (with `b`)."""
    ra, rb = register_pair(a, b, src, dst)
    return a.make_transfer("write", a.prepare_local([(ra.addr, len(src))]),
                           a.prepare_remote(b.name, [(rb.addr, len(dst))]))


def make_transfers_as_slots_free(agent, op, local, remote, count, timeout_s):
    """`count` transfers, made as slots come back: a dropped transfer a lane still
    owns keeps its slot until the lane lets go (NOT_ALLOWED meanwhile). Fails after
    `timeout_s`: a slot lost for good never comes back."""
    deadline, made = time.monotonic() + timeout_s, []
    while len(made) < count:
        try:
            made.append(agent.make_transfer(op, local, remote))
        except kvlane.Error as e:
            assert e.code == kvlane.Code.NOT_ALLOWED and time.monotonic() < deadline, e
            time.sleep(0.01)
    return made

"""Lifetimes: transfers keep their agent alive, a closed agent fails cleanly,
registered buffers stay pinned, dropped transfers free their slots, blocking
calls release the GIL."""
import ctypes
import gc
import socket
import sys
import threading
import time

import pytest

import kvlane
from kvtest import (connect, first_mismatch, make_pair, make_transfers_as_slots_free, pattern,
                    register_pair, write_transfer)

N = 256 << 10


def test_transfer_keeps_its_agent_alive():
    a, b = make_pair("local")
    src, dst = bytearray(pattern(31, N)), bytearray(N)
    t = write_transfer(a, b, src, dst)
    del a
    gc.collect()
    t.post()  # the agent is still there: the transfer holds it
    assert t.wait(10) == kvlane.Code.OK
    assert first_mismatch(dst, src) == -1
    del t
    gc.collect()
    b.close()


def test_closed_agent_fails_cleanly():
    a, b = make_pair("local")
    src, dst = bytearray(pattern(32, N)), bytearray(N)
    t = write_transfer(a, b, src, dst)
    t.post()
    a.close()
    assert a.closed and repr(a) == "<kvlane.Agent closed>"
    for call in (t.post, t.check, t.wait, t.cancel, t.describe, a.export_metadata,
                 a.take_notifications, lambda: a.register_memory(bytearray(16))):
        with pytest.raises(ValueError):
            call()
    t.release()  # the handle went with the agent: nothing to do
    a.close()  # again: nothing
    b.close()


def test_peer_closed_under_a_transfer():
    a, b = make_pair("local")
    src, dst = bytearray(pattern(33, N)), bytearray(N)
    t = write_transfer(a, b, src, dst)
    t.post()
    assert t.wait(10) == kvlane.Code.OK
    b.close()  # the target goes; the initiator's next post fails, no crash
    with pytest.raises(kvlane.Error) as e:
        t.post()
        t.wait(10)
    assert e.value.code == kvlane.Code.REMOTE_DISCONNECT
    a.close()


def test_registered_buffer_is_pinned():
    a, b = make_pair("local")
    buf = bytearray(pattern(34, N))
    refs = sys.getrefcount(buf)
    region = b.register_memory(buf)
    assert sys.getrefcount(buf) == refs + 1  # the export holds it
    with pytest.raises(BufferError):
        buf.extend(b"x")  # may not move while registered
    del buf
    gc.collect()
    # Only the registration holds the bytes now; a READ still finds them.
    back = bytearray(N)
    rback = a.register_memory(back)
    connect(a, b)
    r = a.make_transfer("read", a.prepare_local([(rback.addr, N)]),
                        a.prepare_remote("b", [(region.addr, N)]))
    r.post()
    assert r.wait(10) == kvlane.Code.OK
    assert first_mismatch(back, pattern(34, N)) == -1
    a.close()
    b.close()


def test_deregister_unpins():
    with kvlane.Agent("a", transports=["local"]) as a:
        buf = bytearray(4096)
        refs = sys.getrefcount(buf)
        a.deregister_memory(a.register_memory(buf))
        assert sys.getrefcount(buf) == refs
        buf.extend(b"resizable again")
        raw = a.register_memory(memoryview(buf).cast("B")[:4096])  # a memoryview pins too
        a.deregister_memory(raw)
        raw_buf = ctypes.create_string_buffer(4096)
        addr = ctypes.addressof(raw_buf)
        addr_region = a.register_memory(addr, 4096)  # an address: nothing to pin
        assert (addr_region.addr, addr_region.length) == (addr, 4096)
        a.deregister_memory(addr_region)
    assert a.closed


def test_dropped_transfers_free_their_slots():
    a, b = make_pair("local", max_requests=4)
    src, dst = bytearray(pattern(35, N)), bytearray(N)
    ra, rb = register_pair(a, b, src, dst)
    local, remote = a.prepare_local([(ra.addr, N)]), a.prepare_remote("b", [(rb.addr, N)])
    for i in range(50):
        t = a.make_transfer("write", local, remote)
        t.post()
        if i % 2:
            assert t.wait(10) == kvlane.Code.OK
        del t  # in flight half the time: released all the same
    # The last one dropped in flight may still be owned by its lane (an orphan,
    # released by a later make_transfer once the lane lets go): retry until all
    # four slots come back. A slot lost for good never does.
    held = make_transfers_as_slots_free(a, "write", local, remote, 4, timeout_s=10)
    with pytest.raises(kvlane.Error) as e:
        a.make_transfer("write", local, remote)
    assert e.value.code == kvlane.Code.NOT_ALLOWED
    del held
    a.make_transfer("write", local, remote).release()
    a.close()
    b.close()


def test_blocking_calls_release_the_gil():
    # A listener that never answers: fetch_metadata blocks until its timeout.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        count, stop = [0], threading.Event()

        def spin():
            while not stop.is_set():
                count[0] += 1

        spinner = threading.Thread(target=spin)
        spinner.start()
        time.sleep(0.05)
        before = count[0]
        with pytest.raises(kvlane.Error) as e:
            kvlane.fetch_metadata(f"127.0.0.1:{s.getsockname()[1]}", timeout_s=0.5)
        during = count[0] - before
        stop.set()
        spinner.join()
    assert e.value.code == kvlane.Code.TIMEOUT
    assert during > 10000  # the spinner ran while the call waited


def test_agent_survives_interpreter_exit_order():
    # Objects left for interpreter shutdown (a transfer and its agent) go without a crash.
    import subprocess
    code = ("import kvlane\n"
            "a = kvlane.Agent('a', transports=['local']); b = kvlane.Agent('b', transports=['local'])\n"
            "x, y = bytearray(4096), bytearray(4096)\n"
            "ra, rb = a.register_memory(x), b.register_memory(y)\n"
            "a.load_peer(b.export_metadata())\n"
            "t = a.make_transfer('write', a.prepare_local([(ra.addr, 4096)]),"
            " a.prepare_remote('b', [(rb.addr, 4096)]))\n"
            "t.post()\n")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_check_from_another_thread_during_a_post():
    # A post of more than 64 chunks releases the GIL and queues a new generation
    # on a copy of the handle: a check() from another thread meanwhile read the
    # previous generation and raised NOT_FOUND ("stale transfer handle").
    a, b = make_pair("local", chunk_bytes=4096, merge_adjacent=False)
    n = 1024 * 4096  # 1024 chunks
    src, dst = bytearray(pattern(34, n)), bytearray(n)
    t = write_transfer(a, b, src, dst)
    assert t.describe().chunks > 64
    stop, seen = threading.Event(), []

    def poll():
        while not stop.is_set():
            try:
                t.check()
            except Exception as e:  # any error, not only the engine's, fails the test
                seen.append(repr(e))
                return

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        for _ in range(300):
            t.post()
            assert t.wait(10) == kvlane.Code.OK
            if seen:
                break
    finally:
        stop.set()
        poller.join()
    assert seen == []
    assert first_mismatch(dst, src) == -1
    del t
    a.close()
    b.close()

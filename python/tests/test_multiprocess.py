"""Two processes (this one and peer.py), metadata exchanged through a pipe or
fetched from the child's metadata listener; shm and tcp; every byte checked."""
import os
import queue
import subprocess
import sys
import threading

import pytest

import kvlane
from kvtest import first_mismatch, make_transfers_as_slots_free, pattern

SIZE = 8 << 20
PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer.py")


class Child:
    """peer.py in a subprocess; ask() sends one command and returns its reply."""

    def __init__(self, transport, listen=""):
        self.transport = transport
        args = [sys.executable, "-u", PEER, transport, str(SIZE)] + ([listen] if listen else [])
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        ready, meta, addr, port = self.reply().split()
        assert ready == "ready"
        self.meta, self.addr, self.port = bytes.fromhex(meta), int(addr), int(port)

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)  # exited

    def reply(self, timeout=60):
        line = self.lines.get(timeout=timeout)
        assert line is not None, f"peer.py exited with {self.proc.wait()}"
        return line

    def ask(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.reply()

    def quit(self):
        assert self.ask("fill 0") == "ok"  # still serving after the transfers
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        return self.proc.wait(timeout=60)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def child(request):
    c = Child(*request.param)
    yield c
    c.kill()


@pytest.mark.parametrize("child", [("shm",), ("tcp",)], indirect=True, ids=["shm", "tcp"])
def test_write_read_and_notify_across_processes(child):
    transport = child.transport
    with kvlane.Agent("parent", transports=[transport]) as a:
        src, back = bytearray(pattern(11, SIZE)), bytearray(SIZE)
        rs, rback = a.register_memory(src), a.register_memory(back)
        assert a.load_peer(child.meta) == "child"
        assert a.peer_transport("child") == transport
        remote = a.prepare_remote("child", [(child.addr, SIZE)])

        w = a.make_transfer("write", a.prepare_local([(rs.addr, SIZE)]), remote)
        w.post()
        assert w.wait(30) == kvlane.Code.OK
        assert child.ask("verify 11") == "ok"

        assert child.ask("fill 12") == "ok"
        r = a.make_transfer("read", a.prepare_local([(rback.addr, SIZE)]), remote)
        r.post()
        assert r.wait(30) == kvlane.Code.OK
        assert first_mismatch(back, pattern(12, SIZE)) == -1

        # The same WRITE again with new bytes and a notification: the child checks
        # its buffer as soon as the notification arrives.
        for epoch in (13, 14):
            src[:] = pattern(epoch, SIZE)
            n = a.make_transfer("write", a.prepare_local([(rs.addr, SIZE)]), remote,
                                notif=b"epoch %d" % epoch)
            n.post()
            assert child.ask(f"notif {epoch}") == "ok parent:" + (b"epoch %d" % epoch).hex()
            assert n.wait(30) == kvlane.Code.OK
        assert a.peer_error("child") is None
        assert child.quit() == 0


@pytest.mark.parametrize("child", [("tcp", "127.0.0.1:0")], indirect=True, ids=["tcp"])
def test_fetch_metadata_from_the_listener(child):
    assert child.port > 0
    blob = kvlane.fetch_metadata(f"127.0.0.1:{child.port}", timeout_s=10)
    with kvlane.Agent("parent", transports=["tcp"]) as a:
        assert a.load_peer(blob) == "child"
        src = bytearray(pattern(21, SIZE))
        rs = a.register_memory(src)
        w = a.make_transfer("write", a.prepare_local([(rs.addr, SIZE)]),
                            a.prepare_remote("child", [(child.addr, SIZE)]))
        w.post()
        assert w.wait(30) == kvlane.Code.OK
        assert child.ask("verify 21") == "ok"
        assert child.quit() == 0


@pytest.mark.parametrize("child", [("tcp",)], indirect=True, ids=["tcp"])
def test_dropping_a_transfer_queued_behind_a_stalled_one_does_not_block(child):
    # One lane; the peer stops (SIGSTOP) under a big WRITE and a small one is
    # posted behind it. Dropping the small one released it, which canceled it
    # and then waited for the lane to reach it: io_timeout (5 s here).
    import signal
    import time
    with kvlane.Agent("parent", transports=["tcp"], lanes_per_peer=1, max_requests=2,
                      io_timeout_s=5) as a:
        src = bytearray(pattern(41, SIZE))
        rs = a.register_memory(src)
        assert a.load_peer(child.meta) == "child"
        local = a.prepare_local([(rs.addr, SIZE)])
        remote = a.prepare_remote("child", [(child.addr, SIZE)])
        big = a.make_transfer("write", local, remote)
        small = a.make_transfer("write", a.prepare_local([(rs.addr, 4096)]),
                                a.prepare_remote("child", [(child.addr, 4096)]))
        big.post()
        assert big.wait(30) == kvlane.Code.OK  # connected
        os.kill(child.proc.pid, signal.SIGSTOP)
        try:
            big.post()
            time.sleep(0.3)
            small.post()
            time.sleep(0.1)
            assert small.check() == kvlane.Code.IN_PROGRESS
            start = time.monotonic()
            del small
            dropped_in = time.monotonic() - start
        finally:
            os.kill(child.proc.pid, signal.SIGCONT)
        assert dropped_in < 1.0
        try:
            big.wait(30)
        except kvlane.Error:
            pass  # the stop may have outlasted io_timeout: the lane failed
        del big
    assert child.quit() == 0


@pytest.mark.parametrize("child", [("tcp",)], indirect=True, ids=["tcp"])
def test_close_ends_another_threads_wait(child):
    # A thread waits on a WRITE to a stopped peer (SIGSTOP): close() raised
    # RuntimeError until the lane gave up (io_timeout), and leaving a `with`
    # block raised too. Now the wait ends (CANCELED) and close() goes on.
    import signal
    import threading
    import time
    a = kvlane.Agent("parent", transports=["tcp"], io_timeout_s=20)
    src = bytearray(pattern(51, SIZE))
    rs = a.register_memory(src)
    assert a.load_peer(child.meta) == "child"
    w = a.make_transfer("write", a.prepare_local([(rs.addr, SIZE)]),
                        a.prepare_remote("child", [(child.addr, SIZE)]))
    w.post()
    assert w.wait(30) == kvlane.Code.OK  # connected
    ended = []
    os.kill(child.proc.pid, signal.SIGSTOP)
    try:
        w.post()

        waiting = threading.Event()

        def waiter():
            waiting.set()
            try:
                ended.append(w.wait())
            except (kvlane.Error, ValueError) as e:
                ended.append(e)
        th = threading.Thread(target=waiter)
        th.start()
        assert waiting.wait(10)
        time.sleep(0.5)  # inside wait(), in a 100 ms slice
        start = time.monotonic()
        a.close()  # tcp: the WRITE cut short fails; its bytes were read into the socket
        closed_in = time.monotonic() - start
        th.join(10)
    finally:
        os.kill(child.proc.pid, signal.SIGCONT)
    assert a.closed
    assert not th.is_alive()
    assert isinstance(ended[0], kvlane.Error) and ended[0].code == kvlane.Code.CANCELED, ended
    assert closed_in < 5.0


@pytest.mark.parametrize("child", [("tcp",)], indirect=True, ids=["tcp"])
def test_dropping_a_transfer_a_stalled_peer_holds_does_not_block(child):
    # The peer stops (SIGSTOP) under a WRITE: dropping the transfer waited for
    # the lane, up to io_timeout (10 s here), with Ctrl-C ignored. Now the
    # agent keeps the handle and frees its slot once the lane lets go.
    import signal
    import time
    with kvlane.Agent("parent", transports=["tcp"], max_requests=2, io_timeout_s=10) as a:
        src = bytearray(pattern(31, SIZE))
        rs = a.register_memory(src)
        assert a.load_peer(child.meta) == "child"
        local = a.prepare_local([(rs.addr, SIZE)])
        remote = a.prepare_remote("child", [(child.addr, SIZE)])
        w = a.make_transfer("write", local, remote)
        w.post()
        assert w.wait(30) == kvlane.Code.OK  # connected and moving
        # A lane must own the post before the drop (else the drop merely
        # cancels). It normally has within 0.2 s; on a loaded host the lane
        # may not have run yet (CI once: cancel succeeded). Then the post was
        # canceled before start: resume the peer (the lane's nop frame needs
        # its reply), let it end, and try again with a longer pause.
        owned = None
        for attempt in range(6):
            os.kill(child.proc.pid, signal.SIGSTOP)
            w.post()
            time.sleep(0.2 * 2**attempt)  # the lane has sent what the socket takes and waits
            try:
                w.cancel()
            except kvlane.Error as e:
                owned = e
                break
            os.kill(child.proc.pid, signal.SIGCONT)
            try:  # canceled before a lane started it: wait() raises CANCELED
                ended = w.wait(30)
            except kvlane.Error as e:
                ended = e.code
            assert ended in (kvlane.Code.CANCELED, kvlane.Code.OK)
        try:
            assert owned is not None, "no lane started the post in 12 s"
            assert owned.code == kvlane.Code.NOT_ALLOWED
            start = time.monotonic()
            del w
            dropped_in = time.monotonic() - start
        finally:
            os.kill(child.proc.pid, signal.SIGCONT)
        assert dropped_in < 1.0
        # Its slot comes back once the lane is done: two live transfers fit.
        made = make_transfers_as_slots_free(a, "write", local, remote, 2, timeout_s=30)
        made[1].post()
        assert made[1].wait(30) == kvlane.Code.OK
        assert child.ask("verify 31") == "ok"
        del made
    assert child.quit() == 0


@pytest.mark.parametrize("child", [("tcp",)], indirect=True, ids=["tcp"])
def test_threads_dropping_transfers_under_a_stalling_peer_lose_no_slot(child):
    # Threads make, post and drop transfers while the peer stops and resumes:
    # the dropped ones a lane owns are released by later make_transfer calls,
    # on several threads at once. The list was walked without the GIL while
    # others added to it (16 to 64 of 64 slots were lost for good).
    import signal
    import time
    n = 64
    with kvlane.Agent("parent", transports=["tcp"], max_requests=n, io_timeout_s=30) as a:
        rs = a.register_memory(bytearray(SIZE))
        assert a.load_peer(child.meta) == "child"
        local = a.prepare_local([(rs.addr + i * 4096, 4096) for i in range(n)])
        remote = a.prepare_remote("child", [(child.addr + i * 4096, 4096) for i in range(n)])
        stop, errors = threading.Event(), []

        def worker(k):
            i = k
            while not stop.is_set():
                try:
                    t = a.make_transfer("write", local, remote, local_idx=[i % n],
                                        remote_idx=[i % n])
                    t.post()
                    del t
                except kvlane.Error as e:
                    if e.code != kvlane.Code.NOT_ALLOWED:  # all slots taken: expected
                        errors.append(e)
                i += 1

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        try:
            for _ in range(6):
                os.kill(child.proc.pid, signal.SIGSTOP)
                time.sleep(0.3)
                os.kill(child.proc.pid, signal.SIGCONT)
                time.sleep(0.1)
        finally:
            os.kill(child.proc.pid, signal.SIGCONT)
            stop.set()
            for t in threads:
                t.join()
        assert errors == []
        # Every slot comes back once the lanes are done.
        deadline, made = time.monotonic() + 30, []
        while len(made) < n:
            try:
                made.append(a.make_transfer("write", local, remote, local_idx=[0], remote_idx=[0]))
            except kvlane.Error as e:
                assert e.code == kvlane.Code.NOT_ALLOWED and time.monotonic() < deadline, \
                    f"{len(made)} of {n} slots came back: {e}"
                time.sleep(0.05)
        del made
    assert child.quit() == 0


@pytest.mark.parametrize("child", [("tcp",)], indirect=True, ids=["tcp"])
def test_a_small_post_into_a_full_ring_lets_other_threads_run(child):
    # The peer stops (SIGSTOP) with the lane's ring full: a post of one chunk
    # waits for ring space up to post_timeout_s. It kept the GIL meanwhile (a
    # small post keeps it), so every Python thread stood still; now it lets go.
    import signal
    import time
    with kvlane.Agent("parent", transports=["tcp"], lanes_per_peer=1, lane_ring_slots=2,
                      max_requests=4, post_timeout_s=20) as a:
        src = bytearray(pattern(41, SIZE))
        rs = a.register_memory(src)
        assert a.load_peer(child.meta) == "child"
        local = a.prepare_local([(rs.addr + i * 4096, 4096) for i in range(3)])
        remote = a.prepare_remote("child", [(child.addr + i * 4096, 4096) for i in range(3)])
        ts = [a.make_transfer("write", local, remote, local_idx=[i], remote_idx=[i]) for i in range(3)]
        ts[0].post()
        assert ts[0].wait(30) == kvlane.Code.OK  # connected and moving
        os.kill(child.proc.pid, signal.SIGSTOP)
        # kill() returns before the child stops: wait until it has (state T),
        # else it may still take the posts below and leave the ring room.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open(f"/proc/{child.proc.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "T":
                    break
            time.sleep(0.005)
        posted, outcome = threading.Event(), []
        try:
            ts[0].post()
            ts[1].post()  # both ring slots held: the peer takes nothing

            def post_third():
                try:
                    outcome.append(ts[2].post())
                except kvlane.Error as e:
                    outcome.append(e.code)
                posted.set()

            poster = threading.Thread(target=post_third)
            start = time.monotonic()
            poster.start()
            time.sleep(0.3)  # the GIL comes back to this thread only if post let it go
            back_in = time.monotonic() - start
            still_posting = not posted.is_set()
        finally:
            os.kill(child.proc.pid, signal.SIGCONT)
        poster.join(60)
        assert still_posting and back_in < 5, f"other threads stood still {back_in:.1f} s"
        assert outcome == [kvlane.Code.IN_PROGRESS]
        for t in ts:
            assert t.wait(30) == kvlane.Code.OK
        del ts
    assert child.quit() == 0


@pytest.mark.parametrize("child", [("shm",)], indirect=True, ids=["shm"])
def test_a_second_close_while_one_waits_for_a_stopped_target_raises(child):
    # The shm target is stopped (SIGSTOP) with a WRITE in flight: close() waits
    # for it to let go of this agent's memory, with the GIL released. A close()
    # from another thread meanwhile found the engine agent gone, returned, and
    # unpinned every registered buffer while the target could still copy.
    import signal
    import time
    a = kvlane.Agent("parent", transports=["shm"], io_timeout_s=1)
    src = bytearray(pattern(41, SIZE))
    rs = a.register_memory(src)
    assert a.load_peer(child.meta) == "child"
    w = a.make_transfer("write", a.prepare_local([(rs.addr, SIZE)]),
                        a.prepare_remote("child", [(child.addr, SIZE)]))
    stopped = False
    try:
        for _ in range(20):  # until the stop comes while the post is in flight
            w.post()
            os.kill(child.proc.pid, signal.SIGSTOP)
            stopped = True
            time.sleep(0.05)
            if w.check() == kvlane.Code.IN_PROGRESS:
                break
            os.kill(child.proc.pid, signal.SIGCONT)
            stopped = False
        assert stopped, "every post finished before the stop"
        first = []

        def close_first():
            try:
                a.close()
                first.append(None)
            except kvlane.Error as e:
                first.append(e.code)

        closer = threading.Thread(target=close_first)
        closer.start()
        time.sleep(0.3)  # the first close() waits for the stopped target
        assert closer.is_alive(), "close() did not wait for the stopped target"
        with pytest.raises(RuntimeError, match="another thread is closing"):
            a.close()
    finally:
        os.kill(child.proc.pid, signal.SIGCONT)
    closer.join(60)
    assert not closer.is_alive()
    assert first in ([None], [kvlane.Code.BACKEND])
    del w
    assert child.quit() == 0

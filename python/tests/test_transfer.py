"""Two agents in one process: WRITE and READ with every byte checked, reposts of
one transfer, notifications after the data, scattered descriptor lists."""
import time

import pytest

import kvlane
from kvtest import connect, first_mismatch, make_pair, pattern, register_pair, write_transfer

SIZE = 1 << 20


@pytest.mark.parametrize("transport", ["local", "shm", "tcp"])
def test_write_then_read_every_byte(transport):
    a, b = make_pair(transport)
    with a, b:
        src, back, target = bytearray(pattern(1, SIZE)), bytearray(SIZE), bytearray(SIZE)
        ra, rback, rb = a.register_memory(src), a.register_memory(back), b.register_memory(target)
        connect(a, b)
        assert a.peer_transport("b") == transport
        remote = a.prepare_remote("b", [(rb.addr, SIZE)])
        w = a.make_transfer("write", a.prepare_local([(ra.addr, SIZE)]), remote)
        assert w.post() in (kvlane.Code.IN_PROGRESS, kvlane.Code.OK)
        assert w.wait(10) == kvlane.Code.OK
        assert first_mismatch(target, src) == -1

        target[:] = pattern(2, SIZE)  # the target changes its bytes; a reads them back
        r = a.make_transfer("read", a.prepare_local([(rback.addr, SIZE)]), remote)
        r.post()
        assert r.wait(10) == kvlane.Code.OK
        assert first_mismatch(back, pattern(2, SIZE)) == -1
        assert r.describe().bytes == SIZE and w.op == "write" and r.op == "read"


def test_one_transfer_posted_many_times(local_pair):
    a, b = local_pair
    n = 64 << 10
    src, dst = bytearray(n), bytearray(n)
    t = write_transfer(a, b, src, dst)
    for i in range(200):
        src[:] = pattern(100 + i, n)  # same size: allowed while registered
        t.post()
        while t.check() == kvlane.Code.IN_PROGRESS:
            pass
        assert first_mismatch(dst, src) == -1, f"post {i}"
    t.release()
    assert t.released


def test_notification_arrives_after_the_data(local_pair):
    a, b = local_pair
    n = 4 << 20
    src, dst = bytearray(n), bytearray(n)
    ra, rb = register_pair(a, b, src, dst)
    local, remote = a.prepare_local([(ra.addr, n)]), a.prepare_remote("b", [(rb.addr, n)])
    for epoch in range(1, 6):
        src[:] = pattern(epoch, n)
        t = a.make_transfer("write", local, remote, notif=b"epoch-%d" % epoch)
        t.post()
        deadline = time.monotonic() + 10
        got = []
        while not got and time.monotonic() < deadline:
            got = b.take_notifications()
        # Checked before the initiator's wait: the notification alone says the data is there.
        assert got == [("a", b"epoch-%d" % epoch)]
        assert first_mismatch(dst, src) == -1, f"epoch {epoch}"
        assert t.wait(10) == kvlane.Code.OK
    a.send_notification("b", b"standalone")
    deadline = time.monotonic() + 10
    got = []
    while not got and time.monotonic() < deadline:
        got = b.take_notifications()
    assert got == [("a", b"standalone")]


def test_scattered_pages_with_index_lists(local_pair):
    a, b = local_pair
    page, pages = 4096, 512
    src, dst = bytearray(pattern(5, page * pages)), bytearray(page * pages)
    ra, rb = register_pair(a, b, src, dst)
    local = a.prepare_local([(ra.addr + i * page, page) for i in range(pages)])
    remote = a.prepare_remote("b", [(rb.addr + i * page, page, 0) for i in range(pages)])
    order = list(range(pages))
    order.reverse()  # source page i lands in target page pages-1-i
    t = a.make_transfer("write", local, remote, local_idx=range(pages), remote_idx=order)
    assert t.describe().pairs == pages
    t.post()
    assert t.wait(10) == kvlane.Code.OK
    for i in range(pages):
        j = pages - 1 - i
        assert dst[j * page:(j + 1) * page] == src[i * page:(i + 1) * page], f"page {i}"


def test_numpy_descriptor_arrays(local_pair):
    np = pytest.importorskip("numpy")
    a, b = local_pair
    page, pages = 1024, 4096
    src = np.frombuffer(pattern(6, page * pages), dtype=np.uint8).copy()
    dst = np.zeros(page * pages, dtype=np.uint8)
    ra, rb = register_pair(a, b, src, dst)
    offsets = np.arange(pages, dtype=np.int64) * page
    perm = np.random.default_rng(7).permutation(pages)
    local = a.prepare_local(np.stack([ra.addr + offsets, np.full(pages, page)], axis=1))
    wide = np.stack([rb.addr + offsets, np.full(pages, page), np.zeros(pages)], axis=1).astype(np.uint64)
    remote = a.prepare_remote("b", wide[:, :2])  # a strided view: read through its strides
    assert len(local) == len(remote) == pages
    t = a.make_transfer("write", local, remote, remote_idx=perm.astype(np.int32))
    t.post()
    assert t.wait(10) == kvlane.Code.OK
    got = dst.reshape(pages, page)[perm]  # source page i went to target page perm[i]
    assert np.array_equal(got, src.reshape(pages, page))
    info = t.describe()
    assert (info.pairs, info.bytes) == (pages, page * pages)


def test_adjacent_descriptors_merge(local_pair):
    a, b = local_pair
    n = 256 << 10
    src, dst = bytearray(pattern(8, n)), bytearray(n)
    ra, rb = register_pair(a, b, src, dst)
    descs = [(ra.addr + i * 4096, 4096) for i in range(n // 4096)]
    rdescs = [(rb.addr + i * 4096, 4096) for i in range(n // 4096)]
    t = a.make_transfer("write", a.prepare_local(descs), a.prepare_remote("b", rdescs))
    assert t.describe().segments == 1
    t.post()
    assert t.wait(10) == kvlane.Code.OK
    assert first_mismatch(dst, src) == -1


def test_threads_post_their_own_transfers(local_pair):
    import threading
    a, b = local_pair
    n, threads, rounds = 128 << 10, 4, 50
    srcs = [bytearray(n) for _ in range(threads)]
    dsts = [bytearray(n) for _ in range(threads)]
    ra = [a.register_memory(s) for s in srcs]
    rb = [b.register_memory(d) for d in dsts]
    connect(a, b)
    ts = [a.make_transfer("write", a.prepare_local([(ra[i].addr, n)]),
                          a.prepare_remote("b", [(rb[i].addr, n)])) for i in range(threads)]
    errors = []

    def run(i):
        try:
            for r in range(rounds):
                want = pattern(1000 * i + r, n)
                srcs[i][:] = want
                ts[i].post()
                assert ts[i].wait(10) == kvlane.Code.OK  # GIL released: the others go on
                assert first_mismatch(dsts[i], want) == -1, f"thread {i} round {r}"
        except Exception as e:  # reported by the main thread
            errors.append(e)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert not any(w.is_alive() for w in workers), "a worker still runs after 60 s"
    assert not errors, errors

"""Errors: engine failures raise kvlane.Error with the engine's code; misuse of
the binding raises TypeError or ValueError."""
import pytest

import kvlane
from kvtest import connect, first_mismatch, pattern, register_pair

Code = kvlane.Code


def registered(a, b, n=64 << 10):
    src, dst = bytearray(pattern(3, n)), bytearray(n)
    ra, rb = register_pair(a, b, src, dst)
    return src, dst, ra, rb


def test_local_descriptor_outside_region(local_pair):
    a, b = local_pair
    _, _, ra, _ = registered(a, b)
    with pytest.raises(kvlane.Error) as e:
        a.prepare_local([(ra.addr, 16), (ra.addr + ra.length - 8, 16)])  # runs off the end
    assert e.value.code == Code.INVALID_ARGUMENT
    assert "descriptor 1" in e.value.message
    assert str(e.value).startswith("invalid-argument: ")
    assert isinstance(e.value, RuntimeError)


def test_remote_descriptor_outside_region(local_pair):
    a, b = local_pair
    _, _, _, rb = registered(a, b)
    with pytest.raises(kvlane.Error) as e:
        a.prepare_remote("b", [(rb.addr - 4096, 4096)])
    assert e.value.code == Code.INVALID_ARGUMENT
    assert "remote descriptor 0" in e.value.message


def test_write_into_read_only_region(local_pair):
    a, b = local_pair
    n = 8192
    src, ro = bytearray(pattern(4, n)), bytearray(pattern(9, n))
    back = bytearray(n)
    ra, rback = a.register_memory(src), a.register_memory(back)
    rro = b.register_memory(ro, read_only=True)
    assert rro.read_only
    connect(a, b)
    remote = a.prepare_remote("b", [(rro.addr, n)])
    with pytest.raises(kvlane.Error) as e:
        a.make_transfer("write", a.prepare_local([(ra.addr, n)]), remote)
    assert e.value.code == Code.NOT_ALLOWED
    assert first_mismatch(ro, pattern(9, n)) == -1  # untouched
    r = a.make_transfer("read", a.prepare_local([(rback.addr, n)]), remote)  # READ is fine
    r.post()
    assert r.wait(10) == Code.OK
    assert first_mismatch(back, ro) == -1


def test_engine_errors_carry_their_codes(local_pair):
    a, b = local_pair
    _, _, ra, rb = registered(a, b)
    with pytest.raises(kvlane.Error) as e:
        a.prepare_remote("nobody", [(rb.addr, 16)])
    assert e.value.code == Code.NOT_FOUND
    local = a.prepare_local([(ra.addr, 16)])
    remote = a.prepare_remote("b", [(rb.addr, 32)])
    with pytest.raises(kvlane.Error) as e:  # paired lengths differ
        a.make_transfer("write", local, remote)
    assert e.value.code == Code.INVALID_ARGUMENT
    with pytest.raises(kvlane.Error) as e:
        a.make_transfer("write", local, a.prepare_remote("b", [(rb.addr, 16)]), remote_idx=[1])
    assert e.value.code == Code.INVALID_ARGUMENT
    a.release_prepared(local)
    with pytest.raises(kvlane.Error) as e:
        a.release_prepared(local)
    assert e.value.code == Code.NOT_FOUND
    with pytest.raises(kvlane.Error) as e:
        a.register_memory(ra.addr + 8, 8)  # overlaps a registered region
    assert e.value.code == Code.INVALID_ARGUMENT
    assert a.peer_error("b") is None
    with pytest.raises(kvlane.Error) as e:
        a.peer_error("nobody")
    assert e.value.code == Code.NOT_FOUND


def test_deregistered_region_is_gone(local_pair):
    a, b = local_pair
    buf = bytearray(8192)
    r = a.register_memory(buf)
    a.deregister_memory(r)
    with pytest.raises(kvlane.Error) as e:
        a.prepare_local([(r.addr, 16)])
    assert e.value.code == Code.INVALID_ARGUMENT
    with pytest.raises(kvlane.Error) as e:
        a.deregister_memory(r)
    assert e.value.code == Code.NOT_FOUND


def test_binding_misuse(local_pair):
    a, b = local_pair
    _, _, ra, rb = registered(a, b)
    local = a.prepare_local([(ra.addr, 16)])
    remote = a.prepare_remote("b", [(rb.addr, 16)])
    with pytest.raises(ValueError):
        a.make_transfer("copy", local, remote)
    with pytest.raises(ValueError):
        a.prepare_local([(ra.addr, 16)], kind="gpu")
    with pytest.raises(TypeError):
        a.prepare_local([ra.addr, 16])  # not tuples
    with pytest.raises(TypeError):
        a.prepare_local([(ra.addr, "16")])
    with pytest.raises(ValueError):
        a.prepare_local([(-1, 16)])
    with pytest.raises(ValueError):
        a.make_transfer("write", local, remote, local_idx=[-1])
    with pytest.raises(ValueError):  # lists and regions belong to their agent
        b.make_transfer("write", local, remote)
    with pytest.raises(ValueError):
        b.deregister_memory(ra)
    with pytest.raises(TypeError):
        a.register_memory(ra.addr)  # an address needs a length
    with pytest.raises(BufferError, match="writable"):
        a.register_memory(b"immutable bytes")  # not writable
    with pytest.raises(BufferError, match="own READs"):
        a.register_memory(b"immutable bytes", read_only=True)  # peers only: we may READ into it
    with pytest.raises(ValueError, match="device ordinal"):
        a.prepare_local([(ra.addr, 16, 2**32 + 1)])  # was taken as device 1
    with pytest.raises(ValueError, match="2\\*\\*32-1"):
        a.make_transfer("write", local, remote, local_idx=[-1])  # said "below 2**64"
    with pytest.raises(ValueError):
        a.register_memory(bytearray(16), length=17)
    with pytest.raises(ValueError):
        a.register_memory(bytearray(16), kind="cuda")
    t = a.make_transfer("write", local, remote)
    with pytest.raises(ValueError):
        t.wait(-1)
    t.release()
    with pytest.raises(ValueError):
        t.post()
    with pytest.raises(ValueError):
        t.check()
    t.release()  # again: nothing


def test_a_numpy_integer_is_an_address(local_pair):
    np = pytest.importorskip("numpy")
    a, _ = local_pair
    buf = np.zeros(4096, dtype=np.uint8)
    addr = buf.ctypes.data
    for as_int in (np.uint64(addr), np.int64(addr), np.uintp(addr)):
        r = a.register_memory(as_int, np.uint32(4096))
        assert (r.addr, r.length) == (addr, 4096)
        a.deregister_memory(r)
    with pytest.raises(ValueError, match="non-negative"):
        a.register_memory(np.int64(-1), 16)
    with pytest.raises(TypeError, match="needs a length"):
        a.register_memory(np.uint64(addr))
    with pytest.raises(BufferError, match="writable"):  # a read-only array is no address
        ro = np.zeros(16, dtype=np.uint8)
        ro.flags.writeable = False
        a.register_memory(ro)
    r = a.register_memory(np.zeros((), dtype=np.int64))  # a writable 0-d array is a buffer
    assert r.length == 8
    a.deregister_memory(r)
    ro0d = np.array(addr, dtype=np.int64)  # a read-only 0-d array: memory, not an address
    ro0d.flags.writeable = False
    with pytest.raises(BufferError, match="writable"):
        a.register_memory(ro0d, 4096)


def test_a_removed_peer_is_not_found_but_its_transfers_still_post(local_pair):
    a, b = local_pair
    src, dst, ra, rb = registered(a, b)
    n = len(src)
    t = a.make_transfer("write", a.prepare_local([(ra.addr, n)]), a.prepare_remote("b", [(rb.addr, n)]))
    a.remove_peer("b")
    for call in (lambda: a.prepare_remote("b", [(rb.addr, 16)]), lambda: a.peer_error("b"),
                 lambda: a.peer_transport("b"), lambda: a.send_notification("b", b"x"),
                 lambda: a.remove_peer("b")):
        with pytest.raises(kvlane.Error) as e:
            call()
        assert e.value.code == Code.NOT_FOUND
    t.post()
    assert t.wait(10) == Code.OK
    assert first_mismatch(dst, src) == -1
    t.release()
    connect(a, b)  # a new entry
    assert a.peer_error("b") is None


def test_cuda_memory_needs_a_transport_that_moves_it(local_pair):
    a, b = local_pair
    with pytest.raises(kvlane.Error) as e:  # no cuda transport enabled here
        a.register_memory(1 << 40, 4096, kind="cuda")
    assert e.value.code == Code.NOT_SUPPORTED


def test_host_memory_not_mapped_here_is_refused(local_pair):
    a, _ = local_pair
    with pytest.raises(kvlane.Error) as e:  # no mapping there: e.g. a device pointer as host
        a.register_memory(1 << 40, 4096)
    assert e.value.code == Code.INVALID_ARGUMENT
    assert "not mapped in this process" in e.value.message


def test_a_lane_that_is_not_the_channels_is_refused(local_pair):
    a, b = local_pair
    _, _, ra, rb = registered(a, b)
    local, remote = a.prepare_local([(ra.addr, 64)]), a.prepare_remote("b", [(rb.addr, 64)])
    with pytest.raises(kvlane.Error) as e:  # two lanes per peer by default: 0 and 1
        a.make_transfer("write", local, remote, lane=2)
    assert e.value.code == Code.INVALID_ARGUMENT
    with pytest.raises(ValueError):
        a.make_transfer("write", local, remote, lane=-1)
    t = a.make_transfer("write", local, remote, lane=1)
    t.post()
    assert t.wait(10) == Code.OK

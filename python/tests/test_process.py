"""The process around an agent: an interpreter that exits while daemon threads
are inside blocking calls, and a child forked after an agent was made."""
import os
import subprocess
import sys
import textwrap

import pytest

import kvlane

# Each script runs in its own interpreter (PYTHONPATH is inherited).
EXIT_WITH_DAEMON_WAITERS = textwrap.dedent("""
    import threading, time
    import kvlane
    from kvtest import make_pair, pattern, write_transfer
    a, b = make_pair("{transport}")
    n = 64 << 20
    src, dst = bytearray(pattern(5, n)), bytearray(n)
    t = write_transfer(a, b, src, dst)
    started = threading.Event()
    def loop():
        while True:
            t.post()
            started.set()
            t.wait()
    threading.Thread(target=loop, daemon=True).start()
    started.wait(10)
    time.sleep(0.2)
    print("main done", flush=True)
""")


def run_script(source, timeout=60):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(__file__)] + [p for p in [env.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, "-c", source], env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("transport", ["local", "tcp"])
def test_exit_while_a_daemon_thread_waits(transport):
    # It aborted ("terminate called without an active exception", exit -6):
    # the GIL was taken back in a destructor, where CPython's exit of a daemon
    # thread at finalization may not unwind.
    for _ in range(3):
        r = run_script(EXIT_WITH_DAEMON_WAITERS.format(transport=transport))
        assert r.returncode == 0, r.stderr
        assert "main done" in r.stdout
        assert "terminate" not in r.stderr


def test_forked_child_cannot_use_the_agent_and_closes_it_cleanly():
    a = kvlane.Agent("a", transports=["local"])
    region = a.register_memory(bytearray(4096))
    pid = os.fork()
    if pid == 0:  # the child: report by exit status only
        code = 0
        try:
            try:
                a.export_metadata()
                code = 10  # used an agent whose threads stayed in the parent
            except RuntimeError as e:
                if "fork" not in str(e):
                    code = 11
            a.close()  # let go of, not destroyed: it segfaulted (its threads are the parent's)
            if not a.closed:
                code = 12
        except BaseException:
            code = 13
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), f"the child died: status {status:#x}"
    assert os.WEXITSTATUS(status) == 0
    # The parent's agent is untouched.
    assert a.export_metadata()
    a.deregister_memory(region)
    a.close()


def test_forked_child_agent_writes_into_the_parent():
    # The child's own agent took the copy of the parent's agent in its memory
    # for a local peer: the write "succeeded" into the child's copy of the
    # buffer and the parent's stayed zero.
    a = kvlane.Agent("parent", transports=["local", "shm", "tcp"])
    buf = bytearray(4096)
    region = a.register_memory(buf)
    blob = a.export_metadata()
    pid = os.fork()
    if pid == 0:  # the child: report by exit status only
        code = 0
        try:
            c = kvlane.Agent("child", transports=["local", "shm", "tcp"])
            src = bytearray(b"X" * 4096)
            rs = c.register_memory(src)
            c.load_peer(blob)
            if c.peer_transport("parent") == "local":
                code = 20
            else:
                t = c.make_transfer("write", c.prepare_local([(rs.addr, 4096)]),
                                    c.prepare_remote("parent", [(region.addr, 4096)]))
                t.post()
                code = 0 if t.wait(10) == kvlane.Code.OK else 21
        except BaseException:
            code = 22
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), f"the child died: status {status:#x}"
    assert os.WEXITSTATUS(status) == 0
    assert bytes(buf) == b"X" * 4096
    a.deregister_memory(region)
    a.close()


def test_forked_child_closes_an_agent_another_thread_was_using():
    # The fork came while a thread was inside wait(): the child inherits the
    # count of calls in flight but not the thread, and close() refused ("another
    # thread is inside a call") for good.
    import threading
    from kvtest import make_pair, write_transfer
    a, b = make_pair("local")
    n = 64 << 20
    src, dst = bytearray(n), bytearray(n)
    t = write_transfer(a, b, src, dst)
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            t.post()
            t.wait()

    th = threading.Thread(target=loop)
    th.start()
    try:
        import time
        time.sleep(0.3)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                a.close()
                code = 0 if a.closed else 12
            except BaseException:
                code = 13
            os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        stop.set()
        th.join()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"status {status:#x}"
    del t
    a.close()
    b.close()

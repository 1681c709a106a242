"""Agent(name, **options): every keyword reaches AgentOptions; unknown keywords
and wrong types raise TypeError, values the engine refuses kvlane.Error."""
import pytest

import kvlane


def test_keywords_reach_the_engine():
    opts = dict(policy="global-fifo", transports=["tcp", "local"], tcp_listen_host="127.0.0.1",
                lanes_per_peer=3, chunk_bytes=1 << 20, max_segments_per_chunk=64,
                merge_adjacent=False, stripe_min_bytes=4 << 20, lane_ring_slots=1024,
                max_requests=128, piece_bytes=1 << 30, post_timeout_s=2.5,
                connect_timeout_s=1.0, io_timeout_s=3.0, tcp_keepalive_s=7.0, spin_s=20e-6,
                post_inline_bytes=0,
                max_notification_bytes=1 << 20, max_notification_bytes_per_peer=1 << 19,
                max_conns_per_peer=64, staging_copy="kernel", cuda_proxy_blocks=2,
                cuda_proxy_max_bytes=4096, cuda_proxy_idle_exit_s=0.002,
                cuda_proxy_renew_every_s=0.0005, worker_cpus=[])
    with kvlane.Agent("opts", **opts) as a:
        got = a.options
        assert got.pop("name") == "opts" and a.name == "opts"
        for key, want in opts.items():
            assert got[key] == (pytest.approx(want) if isinstance(want, float) else want), key


def test_defaults_are_the_engines():
    with kvlane.Agent(name="defaults") as a:
        o = a.options
        assert o["transports"] == ["local", "shm", "tcp", "cuda"]
        assert (o["policy"], o["lanes_per_peer"], o["chunk_bytes"]) == ("independent", 2, 2 << 20)
        assert (o["post_timeout_s"], o["io_timeout_s"]) == (30.0, 10.0)
        assert o["tcp_keepalive_s"] == 30.0
        assert (o["max_notification_bytes_per_peer"], o["max_conns_per_peer"]) == (0, 256)
        assert a.metadata_port == 0


def test_metadata_listener_port():
    with kvlane.Agent("listen", transports=["tcp"], metadata_listen="127.0.0.1:0") as a:
        assert a.metadata_port > 0
        blob = kvlane.fetch_metadata(f"127.0.0.1:{a.metadata_port}", timeout_s=5)
        with kvlane.Agent("reader", transports=["tcp"]) as r:
            assert r.load_peer(blob) == "listen"


def test_unknown_keyword_and_wrong_types():
    with pytest.raises(TypeError, match="unexpected keyword argument 'lanes'"):
        kvlane.Agent("x", lanes=2)
    with pytest.raises(TypeError, match="lanes_per_peer"):
        kvlane.Agent("x", lanes_per_peer="2")
    with pytest.raises(TypeError, match="transports"):
        kvlane.Agent("x", transports="tcp")  # a str is not a list of str
    with pytest.raises(TypeError):
        kvlane.Agent()  # the name is required
    with pytest.raises(ValueError, match="io_timeout_s"):
        kvlane.Agent("x", io_timeout_s=float("inf"))
    with pytest.raises(ValueError, match="tcp_keepalive_s.*whole"):
        kvlane.Agent("x", tcp_keepalive_s=0.5)  # would round to 0: keepalive off
    with pytest.raises(ValueError, match="spin_s.*round to 0"):
        kvlane.Agent("x", spin_s=1e-7)  # under a microsecond: would be no spin at all
    # An int the option's type cannot hold is a bad value, not a bad type.
    with pytest.raises(ValueError, match="tcp_listen_port.*70000 is out of range"):
        kvlane.Agent("x", tcp_listen_port=70000)
    with pytest.raises(ValueError, match="max_requests.*-1 is out of range"):
        kvlane.Agent("x", max_requests=-1)


def test_a_negative_device_is_refused():
    with kvlane.Agent("x", transports=["local"]) as a:
        with pytest.raises(ValueError, match="CUDA ordinal"):
            a.register_memory(bytearray(4096), device=-1)


@pytest.mark.parametrize("bad", [dict(lanes_per_peer=0), dict(transports=["rdma"]),
                                 dict(policy="fifo"), dict(staging_copy="fast"),
                                 dict(io_timeout_s=0), dict(lane_ring_slots=1000),
                                 dict(tcp_keepalive_s=-1), dict(tcp_keepalive_s=32768),
                                 dict(max_conns_per_peer=0), dict(transports=[]),
                                 dict(transports=["tcp", "tcp"]),
                                 dict(max_notification_bytes=1 << 20,
                                      max_notification_bytes_per_peer=(1 << 20) + 1)])
def test_values_the_engine_refuses(bad):
    with pytest.raises(kvlane.Error) as e:
        kvlane.Agent("x", **bad)
    assert e.value.code == kvlane.Code.INVALID_ARGUMENT
    with pytest.raises(kvlane.Error) as e:
        kvlane.Agent("")  # names are 1..255 bytes
    assert e.value.code == kvlane.Code.INVALID_ARGUMENT


@pytest.mark.parametrize("name", ["a\nb", "bell\a", "esc\x1b[2J", "c1\x85"])
def test_names_that_are_not_plain_text_are_refused(name):
    # Control characters (C0, DEL, C1) in a name: refused, as a peer's would be.
    with pytest.raises(kvlane.Error, match="AgentOptions.name") as e:
        kvlane.Agent(name)
    assert e.value.code == kvlane.Code.INVALID_ARGUMENT


def test_a_unicode_name_is_taken():
    with kvlane.Agent("pr\u00e4fill-\u20ac", transports=["local"]) as a:
        assert a.name == "pr\u00e4fill-\u20ac"


def test_version():
    assert kvlane.version().startswith("kvlane " + kvlane.__version__)

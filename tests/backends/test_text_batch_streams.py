"""ParallelPrivatizer.privatize_batches with BatchStreams: one random stream per batch, the whole
pipeline (sampling included) in forked workers, the same output and counts whatever the number
of workers."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

from deniable import _threads, get_mechanism
from deniable.backends import _text_fork
from deniable.backends.text import BatchStreams, ParallelPrivatizer, fork_refusal
from deniable.embeddings import Embedding
from deniable.text import privatize_texts
from deniable.text.privatize import ObservedSampler

from .._fork import stop_tqdm_monitor

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "film", "good", "bad", "plot", "it", "was"]


@pytest.fixture(autouse=True)
def no_faiss(monkeypatch):
    """FAISS, which other tests of the session may have imported, rules out forking; these
    mechanisms do not use it."""
    monkeypatch.delitem(sys.modules, "faiss", raising=False)
    stop_tqdm_monitor()
    reason = _text_fork.fork_refusal(object())
    assert reason is None, f"{reason}: {[t.name for t in threading.enumerate()]}"


@pytest.fixture(scope="module")
def emb():
    rng = np.random.default_rng(3)
    words = [*WORDS, *(f"w{i}" for i in range(60))]
    return Embedding(words, rng.standard_normal((len(words), 6)).astype(np.float32))


def batches(n=30, seed=2):
    rng = np.random.default_rng(seed)
    pool = [*WORDS, "The", "CAT", "zebra", "don't", "w7"]
    out = [[" ".join(rng.choice(pool, int(rng.integers(0, 25)))) + "." for _ in range(int(rng.integers(1, 12)))] for _ in range(n)]
    out[3], out[4] = ["... !!", ""], []  # no words: no sample_ids call for these
    return out


def run(mech, workers, rng, bl, **options):
    """(outputs with counts, stats, observed (ids, outputs) per call, the workers' mode)."""
    seen: list = []
    sampler = ObservedSampler(mech, lambda ids, out: seen.append((ids.tolist(), out.tolist())))
    stats: dict = {}
    with ParallelPrivatizer(sampler, workers, group_chars=400) as pp:
        got = [(out, c) for _, out, c in pp.privatize_batches(bl, rng=rng, counts=True, stats=stats, **options)]
        mode = pp._started
    return got, stats, seen, mode


def test_streams_are_numpy_spawned_children():
    def draw(g):
        return g.integers(1 << 62, size=4).tolist()

    assert draw(BatchStreams(5)(3)) == draw(np.random.default_rng(5).spawn(4)[3])
    assert draw(BatchStreams(5).child(2)(3)) == draw(np.random.default_rng(5).spawn(3)[2].spawn(4)[3])
    assert draw(BatchStreams(np.random.SeedSequence(5))(0)) == draw(BatchStreams(5)(0))
    # distinct batches, families and seeds: distinct streams (a failing control for the equalities)
    firsts = {tuple(draw(BatchStreams(s).child(j)(i))) for s in (5, 6) for j in range(3) for i in range(4)}
    assert len(firsts) == 24
    gen = np.random.default_rng(1)
    assert draw(BatchStreams(gen)(0)) != draw(BatchStreams(gen)(0))  # a Generator is never reused as is
    assert draw(BatchStreams(None)(0)) != draw(BatchStreams(None)(0))
    with pytest.raises(ValueError, match="non-negative"):
        BatchStreams(-1)


def test_secure_streams_are_fresh_chacha():
    pytest.importorskip("randomgen")
    s = BatchStreams("secure")
    a, b = s(0), s(0)
    assert type(a.bit_generator).__name__ == "ChaCha" and a.integers(1 << 62) != b.integers(1 << 62)
    assert s.child(3) is s


@pytest.mark.parametrize("name", ["tem", "custext", "madlib", "santext"])
def test_same_output_counts_and_observations_for_every_worker_count(emb, name):
    mech = get_mechanism(name, emb, epsilon=3.0)
    bl = batches()
    results = [run(mech, w, BatchStreams(9).child(1), bl, oov="drop") for w in (1, 2, 3)]
    assert [r[3] for r in results] == ["", "whole", "whole"]
    assert results[0][:3] == results[1][:3] == results[2][:3]
    assert results[0][1]["words"] == sum(len(ids) for ids, _ in results[0][2]) + results[0][1]["unknown"]
    # batch i is privatize_texts with stream i (whatever process ran it)
    expected = [(privatize_texts(mech, b, rng=BatchStreams(9).child(1)(i), oov="drop"), None) for i, b in enumerate(bl)]
    assert [out for out, _ in results[1][0]] == [out for out, _ in expected]
    # failing control: another seed changes the output
    assert run(mech, 2, BatchStreams(10).child(1), bl, oov="drop")[0] != results[0][0]


def test_a_shifted_stream_in_the_workers_is_detected(emb, monkeypatch):
    """Control: if the workers drew batch i from another stream than this process does, the
    comparison above would fail."""
    mech = get_mechanism("custext", emb, epsilon=3.0)
    bl = batches()
    serial = run(mech, 1, BatchStreams(4), bl)[0]
    parent = os.getpid()
    real = BatchStreams.__call__
    monkeypatch.setattr(BatchStreams, "__call__", lambda self, i: real(self, i + (os.getpid() != parent)))
    got, _, _, mode = run(mech, 2, BatchStreams(4), bl)
    assert mode == "whole" and got != serial


class _TorchLike:
    """A numpy mechanism that says its backend is torch (the mode where this process samples)."""

    backend = "torch"

    def __init__(self, mech):
        self.mech, self.vocabulary = mech, mech.vocabulary

    def sample_ids(self, ids, rng=None):
        return self.mech.sample_ids(ids, rng=rng)


def test_torch_backend_and_threads_keep_sampling_in_this_process(emb, monkeypatch):
    mech = get_mechanism("tem", emb, epsilon=3.0)
    bl = batches(20)
    serial = run(mech, 1, BatchStreams(2), bl)
    assert fork_refusal(_TorchLike(mech)) == "the torch backend samples in one process"
    torch_like = run(_TorchLike(mech), 2, BatchStreams(2), bl)
    assert torch_like[3] == "text" and torch_like[:3] == serial[:3]
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        assert fork_refusal(mech) == "other threads are running"
        threaded = run(mech, 2, BatchStreams(2), bl)
    finally:
        stop.set()
        t.join()
    assert threaded[3] == "text" and threaded[:3] == serial[:3]
    monkeypatch.setitem(sys.modules, "faiss", object())
    assert fork_refusal(mech) == "FAISS (OpenMP) is loaded"
    # an int seed (one generator for all batches) keeps the text-only workers
    assert run(mech, 2, 2, bl)[3] == "text"


class _Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("this exception does not pickle")


def test_worker_errors_stop_every_worker(emb, monkeypatch):
    mech = get_mechanism("tem", emb, epsilon=3.0)
    bl = batches(30)
    real = _text_fork.privatize_texts

    def failing(m, texts, **kw):
        if texts and texts[0] == "boom":
            raise ValueError("bad batch")
        return real(m, texts, **kw)

    monkeypatch.setattr(_text_fork, "privatize_texts", failing)  # inherited by the forked workers
    pp = ParallelPrivatizer(mech, 2, group_chars=300)
    with pytest.raises(ValueError, match="bad batch"):
        list(pp.privatize_batches([*bl[:12], ["boom"], *bl[12:]], rng=BatchStreams(0)))
    assert not pp._procs
    # an exception that does not pickle, raised in the worker, comes back as its text
    parent = os.getpid()

    def unpicklable(m, texts, **kw):
        if os.getpid() != parent:
            raise _Unpicklable("cannot go through a pipe")
        return real(m, texts, **kw)

    monkeypatch.setattr(_text_fork, "privatize_texts", unpicklable)
    with pytest.raises(RuntimeError, match="_Unpicklable: cannot go through a pipe"):
        list(pp.privatize_batches(bl, rng=BatchStreams(0)))
    assert not pp._procs
    monkeypatch.setattr(_text_fork, "privatize_texts", failing)
    it = pp.privatize_batches(bl, rng=BatchStreams(1))
    next(it)
    procs = list(pp._procs)
    it.close()  # the caller stops early
    assert procs and not pp._procs and not any(p.is_alive() for p in procs)
    # a worker that dies before its first group (the send fails), and one that dies with groups
    # in flight (far more groups than are in flight at once: it is needed after the first batch)
    assert pp.start() == "whole"
    pp._procs[0].kill()
    pp._procs[0].join()
    with pytest.raises(RuntimeError, match="stopped unexpectedly"):
        list(pp.privatize_batches(bl, rng=BatchStreams(1)))
    assert not pp._procs
    it = pp.privatize_batches(batches(400), rng=BatchStreams(1))
    next(it)
    pp._procs[0].kill()
    with pytest.raises(RuntimeError, match="stopped unexpectedly"):
        list(it)
    assert not pp._procs
    pp.close()


def test_the_text_paths_helper_threads_do_not_rule_out_forking(emb, monkeypatch):
    """A large batch cut between the text path's helper threads leaves them idle in this
    process; forking stops them first, so whole-pipeline workers still start."""
    from deniable import _threads
    from deniable.text import _bulk, _kernels, privatize

    if _kernels.compiled() is None:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(_bulk, "PARALLEL_MIN_TOKENS", 1)
    monkeypatch.setattr(_threads, "_THREADS", [2])
    monkeypatch.setattr(privatize, "BULK_MIN_CHARS", 0)
    mech = get_mechanism("tem", emb, epsilon=3.0)
    mech.privatize(["the cat sat on the mat"] * 50, rng=0)
    assert any(t.name.startswith(_threads.THREAD_PREFIX) for t in threading.enumerate())
    assert fork_refusal(mech) is None
    assert not any(t.name.startswith(_threads.THREAD_PREFIX) for t in threading.enumerate())
    bl = batches(20)
    assert run(mech, 2, BatchStreams(2), bl)[3] == "whole"


class _Counted:
    """A worker's pipe that counts the groups sent to it and not answered yet."""

    def __init__(self, conn, most: list[int]) -> None:
        self.conn, self.most, self.waiting = conn, most, 0

    def send(self, msg) -> None:
        self.conn.send(msg)
        if msg is not None:
            self.waiting += 1
            self.most.append(self.waiting)

    def recv(self):
        msg = self.conn.recv()
        self.waiting -= 1
        return msg

    def __getattr__(self, name):  # fileno, close, poll
        return getattr(self.conn, name)


@pytest.mark.parametrize("quick", [False, True])
def test_workers_take_the_next_group_while_working_on_one(emb, monkeypatch, quick):
    """With N processes, N - 1 are forked workers and this one privatizes a group itself while
    each worker has QUEUED_PER_WORKER unanswered groups holding as many characters (the next
    waits in the worker's inbox, so it never waits for this process), QUEUED_SHORT once a group
    of its own was quick; with groups larger than a pipe holds, neither side blocks the other's
    send (a thread in each worker reads its messages as they come)."""
    monkeypatch.setattr(_text_fork, "SHORT_GROUP_SECONDS", 600.0 if quick else 0.0)  # every group quick / none
    mech = get_mechanism("custext", emb, epsilon=2.0)
    rng = np.random.default_rng(4)
    # about 300 KB a group, each way; enough groups left after this process's first to fill a
    # worker to QUEUED_SHORT even when both answered all theirs meanwhile
    big = [[" ".join(rng.choice(WORDS, 70_000)) + "\n"] for _ in range(16)]
    expected = [privatize_texts(mech, texts, rng=BatchStreams(7)(i)) for i, texts in enumerate(big)]
    most: list[int] = []
    here = [0]
    privatize_group = _text_fork._group

    def counted(*a):
        here[0] += 1
        return privatize_group(*a)

    got: list = []
    with ParallelPrivatizer(mech, 3) as pp:  # one batch a group
        assert pp.start() == "whole" and len(pp._procs) == 2
        monkeypatch.setattr(_text_fork, "_group", counted)  # (after the fork: counts this process's groups)
        pp._conns[:] = [_Counted(c, most) for c in pp._conns]

        def consume() -> None:
            for _, out, _ in pp.privatize_batches(big, rng=BatchStreams(7)):
                got.append(out)

        t = threading.Thread(target=consume, daemon=True)
        t.start()
        t.join(timeout=120)
        if t.is_alive():  # blocked: stop the workers so the thread ends
            for p in pp._procs:
                p.terminate()
            t.join(timeout=10)
            pytest.fail("the main process and a worker blocked each other's sends")
    assert got == expected
    # a second group waiting at a worker; more once this process's group was quick
    assert max(most) == (_text_fork.QUEUED_SHORT if quick else _text_fork.QUEUED_PER_WORKER)
    assert 1 <= here[0] < len(big) and len(most) + here[0] == len(big)


def test_this_process_leaves_a_larger_group_to_the_workers(emb, monkeypatch):
    """Growing batches (the command line's first ones are small): this process privatizes a group
    only when every worker has at least as many characters waiting, so a worker is not left
    idle while this process works on a group larger than what the worker has."""
    mech = get_mechanism("custext", emb, epsilon=2.0)
    rng = np.random.default_rng(5)
    sizes = [4_000, 8_000, 16_000, 64_000, 64_000, 64_000, 64_000]  # words per batch: one batch a group
    bl = [[" ".join(rng.choice(WORDS, n)) + "\n"] for n in sizes]
    here: list[int] = []
    threads_here: set[int] = set()
    privatize_group = _text_fork._group

    def counted(mechanism, record, streams, first, texts, *rest):
        here.append(first)
        threads_here.add(_threads.threads())
        return privatize_group(mechanism, record, streams, first, texts, *rest)

    monkeypatch.setattr(_threads, "_THREADS", [3])
    with ParallelPrivatizer(mech, 2) as pp:
        assert pp.start() == "whole"
        pp.blas_threads = 1  # this process's share of the cores, as on two cores
        monkeypatch.setattr(_text_fork, "_group", counted)
        got = [out for _, out, _ in pp.privatize_batches(bl, rng=BatchStreams(7))]
    assert got == [privatize_texts(mech, texts, rng=BatchStreams(7)(i)) for i, texts in enumerate(bl)]
    # 0 and 1 go to the worker; 2 and 3, each larger than what it has waiting, too, as it answers
    assert here and min(here) >= 4
    # the groups privatized here ran their loops on this process's share of threads; then 3 again
    assert threads_here == {1} and _threads.threads() == 3

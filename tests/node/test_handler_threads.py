"""The thread driver's handler threads (flowsched.drivers.workers.HandlerThreads): one shared
queue, at most ``size`` threads, none idle while a job waits behind a slow one."""

from __future__ import annotations

import threading

import pytest

from flowsched.drivers.workers import HandlerThreads

WAIT = 10.0  # seconds: only a bound against hanging, never a timing assertion


def test_a_job_behind_a_slow_one_runs_on_another_thread() -> None:
    pool = HandlerThreads(4, "t-slow")
    release, ran = threading.Event(), threading.Event()
    names: list[str] = []
    slow: list[str] = []

    def block(_: object) -> None:
        slow.append(threading.current_thread().name)
        release.wait(WAIT)

    try:
        pool.submit(block, None)
        pool.submit(lambda _: (names.append(threading.current_thread().name), ran.set()), None)
        assert ran.wait(WAIT)  # while the first job still blocks its thread
        assert not release.is_set()
        assert len(slow) == 1 and names[0] != slow[0]  # whichever thread took which job
    finally:
        release.set()
        pool.shutdown()


def test_a_free_thread_takes_the_next_job_and_no_new_one_starts() -> None:
    pool = HandlerThreads(4, "t-reuse")
    names: list[str] = []
    try:
        for _ in range(20):
            done = threading.Event()

            def record(event: threading.Event) -> None:
                names.append(threading.current_thread().name)
                event.set()

            pool.submit(record, done)
            assert done.wait(WAIT)
            # the thread comes back for the next job (its token) before it is handed in
            while not pool._free:
                threading.Event().wait(0.001)
        assert set(names) == {"t-reuse_0"}
    finally:
        pool.shutdown()


def test_it_starts_a_thread_for_every_job_handed_out_up_to_its_size() -> None:
    pool = HandlerThreads(3, "t-size")
    release = threading.Event()
    started = threading.Semaphore(0)

    def block(_: object) -> None:
        started.release()
        release.wait(WAIT)

    try:
        for _ in range(5):
            pool.submit(block, None)
        for _ in range(3):
            assert started.acquire(timeout=WAIT)
        assert not started.acquire(timeout=0.05)  # the 4th and 5th wait for a free thread
        names = sorted(t.name for t in threading.enumerate() if t.name.startswith("t-size_"))
        assert names == ["t-size_0", "t-size_1", "t-size_2"]
        release.set()
        assert started.acquire(timeout=WAIT) and started.acquire(timeout=WAIT)
    finally:
        release.set()
        pool.shutdown()


def test_shutdown_ends_its_threads_and_refuses_new_jobs() -> None:
    pool = HandlerThreads(2, "t-stop")
    done = threading.Event()
    pool.submit(lambda _: done.set(), None)
    assert done.wait(WAIT)
    threads = [t for t in threading.enumerate() if t.name.startswith("t-stop_")]
    assert [t.name for t in threads] == ["t-stop_0"]  # started only when none is free
    pool.shutdown()
    pool.shutdown()  # idempotent
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="t-stop"):
        pool.submit(lambda _: None, None)


def test_a_job_that_raises_does_not_end_its_thread() -> None:
    pool = HandlerThreads(1, "t-raise")
    done = threading.Event()

    def boom(_: object) -> None:
        raise RuntimeError("boom")

    try:
        pool.submit(boom, None)
        pool.submit(lambda _: done.set(), None)
        assert done.wait(WAIT)
    finally:
        pool.shutdown()


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="size must be at least 1, got 0"):
        HandlerThreads(0, "t-bad")


def test_prestarted_threads_take_the_first_jobs_and_none_more_start() -> None:
    """A node's start starts every thread ahead: the first burst (``size`` jobs at once,
    each blocking until all have started) runs on those threads, none started for it."""
    pool = HandlerThreads(4, "t-pre")
    try:
        pool.prestart()
        started = set(pool._threads)
        assert len(started) == 4 and all(t.is_alive() for t in started)
        barrier = threading.Barrier(4, timeout=WAIT)
        names: list[str] = []
        done = threading.Semaphore(0)

        def job(_: object) -> None:
            barrier.wait()  # only if 4 threads run jobs at once
            names.append(threading.current_thread().name)
            done.release()

        for _ in range(4):
            pool.submit(job, None)
        for _ in range(4):
            assert done.acquire(timeout=WAIT)
        assert set(pool._threads) == started and len(set(names)) == 4
        pool.prestart()  # all there already: nothing more
        assert len(pool._threads) == 4
    finally:
        pool.shutdown()
    for thread in started:
        thread.join(WAIT)
        assert not thread.is_alive()

"""The reader-writer lock every column storage holds around reads and writes."""
import threading
import time

from hybridsearch.engine.rwlock import RWLock  # internal: the lock on its own is the unit under test


def test_readers_share_and_a_writer_is_alone():
    lock = RWLock()
    inside = {"readers": 0, "writers": 0, "max_readers": 0, "bad": 0}
    guard = threading.Lock()

    def reader():
        for _ in range(200):
            with lock.read():
                with guard:
                    inside["readers"] += 1
                    inside["max_readers"] = max(inside["max_readers"], inside["readers"])
                    inside["bad"] += inside["writers"] > 0
                time.sleep(0)
                with guard:
                    inside["readers"] -= 1

    def writer():
        for _ in range(100):
            with lock.write():
                with guard:
                    inside["writers"] += 1
                    inside["bad"] += inside["writers"] > 1 or inside["readers"] > 0
                time.sleep(0)
                with guard:
                    inside["writers"] -= 1

    threads = [threading.Thread(target=reader) for _ in range(4)] + [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert inside["bad"] == 0
    assert inside["readers"] == 0 and inside["writers"] == 0


def test_a_waiting_writer_blocks_new_readers_and_gets_in():
    lock = RWLock()
    order = []
    first_in = threading.Event()
    release_first = threading.Event()

    def long_reader():
        with lock.read():
            first_in.set()
            release_first.wait(10)
            order.append("reader1 out")

    def writer():
        with lock.write():
            order.append("writer")

    def late_reader():
        with lock.read():
            order.append("reader2")

    r1 = threading.Thread(target=long_reader)
    r1.start()
    first_in.wait(10)
    w = threading.Thread(target=writer)
    w.start()
    deadline = time.monotonic() + 10
    # the late reader must arrive once the writer waits (a sleep instead would make the test
    # timing-dependent)
    while not lock.waiting_writers and time.monotonic() < deadline:
        time.sleep(0.001)
    r2 = threading.Thread(target=late_reader)
    r2.start()
    time.sleep(0.05)
    assert order == []  # the late reader waits behind the waiting writer
    release_first.set()
    for t in (r1, w, r2):
        t.join(10)
    assert order == ["reader1 out", "writer", "reader2"]


def test_back_to_back_writers_do_not_starve_a_reader():
    """Phase-fair: a leaving writer lets the waiting readers in before the next writer."""
    lock = RWLock()
    counts = {"reads": 0, "writes": 0}
    stop = threading.Event()

    def writer():
        while not stop.is_set():
            with lock.write():
                counts["writes"] += 1
                time.sleep(0.0005)

    def reader():
        while not stop.is_set():
            with lock.read():
                counts["reads"] += 1

    threads = [threading.Thread(target=writer) for _ in range(2)] + [threading.Thread(target=reader)]
    for t in threads:
        t.start()
    while counts["writes"] < 400:
        time.sleep(0.01)
    stop.set()
    for t in threads:
        t.join(timeout=10)
    # a writer-preferring lock lets the reader in almost never; phase-fair, about once per write
    assert counts["reads"] >= 0.25 * counts["writes"], counts

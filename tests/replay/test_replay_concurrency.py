"""Concurrent actors and learners on one table: the limiter holds samples per insert inside its window."""
import threading
import time

import numpy as np
from replay_items import SPEC, make_items

from menger.replay import ReplayClosed, SampleToInsertRatio, Table, fifo, prioritized


def test_concurrent_writers_and_readers_stay_inside_the_error_buffer():
    spi, min_size, error_buffer = 4.0, 100, 64.0
    limiter = SampleToInsertRatio(spi, min_size, error_buffer)
    table = Table("shared", 500, prioritized(0.6), fifo(), limiter, item_spec=SPEC, seed=0)
    errors, observed = [], []
    inserts_each, insert_batch, sample_batch = 1600, 8, 16
    done_writing = threading.Event()

    def writer(offset: int):
        try:
            rng = np.random.default_rng(offset)
            for start in range(0, inserts_each, insert_batch):
                table.insert_batch(make_items(insert_batch, offset + start), rng.random(insert_batch) + 0.1,
                                   timeout_s=10)
        except Exception as error:          # noqa: BLE001 (reported below)
            errors.append(error)

    def reader():
        rng = np.random.default_rng()
        try:
            while True:
                sample = table.sample(sample_batch, timeout_s=10)
                table.update_priorities(sample.keys, rng.random(sample_batch) + 0.1)
        except ReplayClosed:
            pass
        except Exception as error:          # noqa: BLE001
            errors.append(error)

    def monitor():
        while not done_writing.is_set():
            metrics = table.metrics()       # one consistent snapshot, taken under the table's lock
            observed.append((metrics["replay/inserts"], metrics["replay/samples"], metrics["replay/size"]))
            time.sleep(0.001)

    threads = [threading.Thread(target=writer, args=(n * 100_000,)) for n in range(2)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    watcher = threading.Thread(target=monitor)
    for thread in threads + [watcher]:
        thread.start()
    for thread in threads[:2]:
        thread.join(60)
    # The writers are done; the readers take what the limiter still allows, then block until closed.
    deadline = time.monotonic() + 10
    while table.can_sample(sample_batch) and time.monotonic() < deadline:
        time.sleep(0.01)
    done_writing.set()
    table.close()
    for thread in threads[2:] + [watcher]:
        thread.join(10)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads + [watcher])

    inserts, samples = limiter.inserts, limiter.samples
    assert inserts == 2 * inserts_each
    # Every snapshot: the ratio error within the window once sampling began (Reverb's guarantee).
    for snapshot_inserts, snapshot_samples, _ in observed:
        diff = snapshot_inserts * spi - snapshot_samples
        assert diff <= limiter.max_diff
        if snapshot_samples:
            assert diff >= limiter.min_diff
    assert len(observed) > 10
    # At the end the learner has sampled all it was allowed: samples per insert is spi within the buffer.
    assert abs(limiter.error) <= error_buffer
    assert abs(samples / (inserts - min_size) - spi) <= error_buffer / (inserts - min_size) + 1e-9
    assert table.metrics()["replay/insert_blocked_s"] > 0 and len(table) == 500

#!/usr/bin/python3
"""A real client of coll/dualrail: an mpi4py program on numpy arrays.

Default mpi4py initialisation, so MPI_THREAD_MULTIPLE (checked). For
--seconds S, every rank loops, all ranks together:

  - Allreduce (int64 sum, float64 max, in place and not), Bcast from a
    rotating root, Allgather, Iallreduce + Wait, on MPI_COMM_WORLD, with
    element counts from 1 to 1 Mi (8 MiB);
  - meanwhile two Python threads, each on its own communicator ("py_thread0",
    a dup of the world; "py_thread1", the world's ranks reversed), run
    Allreduce / Bcast / Allgather loops of their own at the same time (mpi4py
    releases the GIL inside MPI calls, so they are inside coll/dualrail
    concurrently).

Every result is compared exactly with what numpy computes from the same
inputs (integers held exactly in both types). Prints
"mpi4py_client: start <epoch>" when the timed loop begins (fault schedules
count from it), and on rank 0 "N passed, M failed" summed over ranks and
threads. Exit status 1 on any wrong result.
"""
import argparse
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

COUNTS = [1, 3, 1000, 65537, 1 << 20]


def expect(rank_values, op):
    out = rank_values[0].copy()
    for v in rank_values[1:]:
        out = op(out, v)
    return out


def contribution(seed, it, rank, count, dtype):
    # Exact in int64 and float64: below 2^40.
    base = (seed + 1) * (1 << 32) + (it % 4096) * (1 << 20) + (rank + 1) * 4096
    return (np.arange(count, dtype=np.int64) % 4096 + base).astype(dtype)


class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.lock = threading.Lock()

    def check(self, ok, what):
        with self.lock:
            if ok:
                self.passed += 1
            else:
                self.failed += 1
                print(f"rank {MPI.COMM_WORLD.Get_rank()}: WRONG RESULT: {what}",
                      file=sys.stderr, flush=True)


def round_on(comm, seed, it, tally, nonblocking):
    """One round of collectives on comm, every result checked."""
    rank, size = comm.Get_rank(), comm.Get_size()
    count = COUNTS[(it + seed) % len(COUNTS)]
    # Allreduce, int64 sum (in place on odd rounds).
    mine = contribution(seed, it, rank, count, np.int64)
    want = expect([contribution(seed, it, r, count, np.int64) for r in range(size)], np.add)
    if it % 2:
        buf = mine.copy()
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
    else:
        buf = np.empty_like(mine)
        comm.Allreduce(mine, buf, op=MPI.SUM)
    tally.check(np.array_equal(buf, want), f"Allreduce sum seed {seed} round {it} count {count}")
    # Allreduce, float64 max.
    mine = contribution(seed, it, (rank * 7) % size, count, np.float64)
    want = expect([contribution(seed, it, (r * 7) % size, count, np.float64)
                   for r in range(size)], np.maximum)
    buf = np.empty_like(mine)
    comm.Allreduce(mine, buf, op=MPI.MAX)
    tally.check(np.array_equal(buf, want), f"Allreduce max seed {seed} round {it} count {count}")
    # Bcast from a rotating root.
    root = it % size
    buf = contribution(seed, it, root, count, np.int64) if rank == root else \
        np.full(count, -1, dtype=np.int64)
    comm.Bcast(buf, root=root)
    tally.check(np.array_equal(buf, contribution(seed, it, root, count, np.int64)),
                f"Bcast seed {seed} round {it} root {root} count {count}")
    # Allgather of count // size elements per rank (at least 1).
    per = max(1, count // size)
    mine = contribution(seed, it, rank, per, np.int64)
    out = np.empty(per * size, dtype=np.int64)
    comm.Allgather(mine, out)
    want = np.concatenate([contribution(seed, it, r, per, np.int64) for r in range(size)])
    tally.check(np.array_equal(out, want), f"Allgather seed {seed} round {it} count {per}")
    if nonblocking:
        # Iallreduce: two outstanding, completed by Wait (in order of issue on comm).
        a = contribution(seed, it, rank, count, np.int64)
        b = contribution(seed, it + 1, rank, count, np.int64)
        ra, rb = np.empty_like(a), np.empty_like(b)
        reqs = [comm.Iallreduce(a, ra, op=MPI.SUM), comm.Iallreduce(b, rb, op=MPI.SUM)]
        MPI.Request.Waitall(reqs)
        wa = expect([contribution(seed, it, r, count, np.int64) for r in range(size)], np.add)
        wb = expect([contribution(seed, it + 1, r, count, np.int64) for r in range(size)], np.add)
        tally.check(np.array_equal(ra, wa) and np.array_equal(rb, wb),
                    f"Iallreduce seed {seed} round {it} count {count}")


def loop(comm, seed, seconds, tally, nonblocking, rounds):
    """Rounds until every rank of comm saw the time run out (they agree each round)."""
    start = time.time()
    it = 0
    while True:
        round_on(comm, seed, it, tally, nonblocking)
        it += 1
        late = np.array([1 if time.time() - start > seconds else 0], dtype=np.int32)
        comm.Allreduce(MPI.IN_PLACE, late, op=MPI.MAX)
        if late[0] or it >= 100000:
            break
    rounds[seed] = it


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--no-threads", action="store_true")
    args = ap.parse_args()

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    if MPI.Query_thread() != MPI.THREAD_MULTIPLE:
        print(f"rank {rank}: mpi4py did not initialise with MPI_THREAD_MULTIPLE",
              file=sys.stderr)
        world.Abort(2)
    tally = Tally()
    comms = []
    if not args.no_threads:
        comms.append(world.Dup())
        comms.append(world.Split(0, size - rank))
        for i, c in enumerate(comms):
            c.Set_name(f"py_thread{i}")
    world.Barrier()
    if rank == 0:
        print(f"mpi4py_client: start {time.time():.6f}: {size} ranks, thread level "
              f"MPI_THREAD_MULTIPLE, {len(comms)} thread(s) beside the main one", flush=True)
    rounds = {}
    threads = [threading.Thread(target=loop, args=(c, i + 1, args.seconds, tally, False, rounds))
               for i, c in enumerate(comms)]
    for t in threads:
        t.start()
    loop(world, 0, args.seconds, tally, True, rounds)
    for t in threads:
        t.join()
    for c in comms:
        c.Free()
    totals = np.array([tally.passed, tally.failed], dtype=np.int64)
    world.Allreduce(MPI.IN_PLACE, totals, op=MPI.SUM)
    if rank == 0:
        print(f"mpi4py_client: rounds per communicator {sorted(rounds.items())}")
        print(f"{totals[0]} passed, {totals[1]} failed", flush=True)
    return 1 if totals[1] else 0


if __name__ == "__main__":
    sys.exit(main())

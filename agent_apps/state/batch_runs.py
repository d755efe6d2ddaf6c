"""The runs of ``agent-apps batch``, by results file and input (``store.batch_runs``).

A batch records which run each input's run is before the run starts, keyed by the
results file (its absolute path) and the input's index, with the hash of the input
line. ``--resume`` after a crash (even ``kill -9``) finds there the run of each input
that has no result line yet and takes it up from its journal, as ``agent-apps resume``
does, instead of running it from scratch: no call the journal holds is made again.
"""

from __future__ import annotations

import time

from ._db import Database

__all__ = ["BatchRuns"]


class BatchRuns:
    """``store.batch_runs``: which run each input of a results file started."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def start(self, output: str, index: int, input_hash: str | None, run_id: str) -> None:
        """Input ``index`` of the batch writing ``output`` runs as ``run_id`` (a later
        attempt replaces an earlier one)."""
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO batch_runs (output, idx, input_hash, run_id, started_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (output, idx) DO UPDATE SET input_hash = excluded.input_hash, run_id = excluded.run_id, "
                "started_at = excluded.started_at",
                (output, index, input_hash, run_id, time.time()),
            )

    def runs(self, output: str) -> dict[int, tuple[str | None, str]]:
        """``{index: (input hash, run id)}`` of the batch writing ``output``."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT idx, input_hash, run_id FROM batch_runs WHERE output = ?", (output,))
            return {int(index): (hashed, run_id) for index, hashed, run_id in rows.fetchall()}

    def forget(self, output: str) -> None:
        """A new batch writes ``output``: the runs of an earlier one are not its inputs'."""
        with self.db.write() as conn:
            conn.execute("DELETE FROM batch_runs WHERE output = ?", (output,))

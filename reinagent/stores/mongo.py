"""MongoDB store through pymongo: `mongodb://[USER:PASSWORD@]HOST[:PORT]/DB` (DB default `reinagent`).

Collections: meta (schema version), runs (spec), records (unique index on run_id, task_id, trial,
sample, generation, revision), markers (supersede markers), generations, counters (a run's append
sequence, shared by records and markers, so the log reads back in order), leases (writers).

A standalone MongoDB has no multi-document transactions, so the order of writes carries the
guarantees: a marker raises its keys' generations *before* it is written (a writer killed between
the two leaves the old records live and a redo of the next generation, which the log order still
reads right). One writer per run: a lease document {_id: run id, owner, expires} taken with an
atomic insert or a conditional update of an expired lease, renewed every ttl/3 by a thread; a
writer that finds its lease taken stops writing with a one-line error. A killed writer's lease
expires after ttl_s (30 s), after which `resume` may take it.

Tested at the API level with mongomock (no MongoDB server could be installed here); the code path
is the same against a real server.
"""

from __future__ import annotations

import secrets
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path
from urllib.parse import urlsplit

from reinagent.records import RunSpec, Supersede, TrialRecord
from reinagent.redact import redact
from reinagent.store import Entry
from reinagent.stores.base import (SCHEMA_VERSION, AsyncAppend, DatabaseRuns, Store, StoreError, check_run_id,
                                   record_sample, same_episode)
from reinagent.stores.sql import first_line
from reinagent.text import valid_data

KEY_FIELDS = ("run_id", "task_id", "trial", "sample", "generation", "revision")


def _pymongo():
    try:
        import pymongo
    except ImportError:
        raise StoreError("mongodb:// stores need pymongo: pip install 'reinagent[mongo]'") from None
    return pymongo


class MongoStore(DatabaseRuns, Store):
    kind = "mongodb"

    def __init__(self, url: str, *, client=None, timeout_s: float = 5.0, lease_ttl_s: float = 30.0):
        self.url = redact(url)
        self.lease_ttl_s = lease_ttl_s
        pymongo = _pymongo()
        self._errors = (pymongo.errors.PyMongoError,)
        name = urlsplit(url).path.lstrip("/").split("?")[0] or "reinagent"
        ms = int(timeout_s * 1000)
        try:
            self.client = client or pymongo.MongoClient(url, serverSelectionTimeoutMS=ms, connectTimeoutMS=ms,
                                                        appname="reinagent")
            self.db = self.client[name]
            self._init_schema(pymongo)
        except self._errors as err:
            # pymongo appends its whole topology description; the reason is the part before it
            raise StoreError(f"cannot use {self.url}: {first_line(err).split(', Timeout:')[0]}") from None

    def _init_schema(self, pymongo) -> None:
        db = self.db
        db.meta.update_one({"_id": "schema_version"}, {"$setOnInsert": {"value": SCHEMA_VERSION}}, upsert=True)
        found = db.meta.find_one({"_id": "schema_version"})["value"]
        if found != SCHEMA_VERSION:
            raise StoreError(f"{self.url} holds reinagent store schema version {found}; this reinagent reads "
                             f"version {SCHEMA_VERSION}: use a matching reinagent, or another database")
        db.records.create_index([(f, pymongo.ASCENDING) for f in KEY_FIELDS], unique=True, name="key")
        db.records.create_index([("run_id", 1), ("seq", 1)], name="log")
        db.markers.create_index([("run_id", 1), ("seq", 1)], name="log")
        db.runs.create_index([("benchmark", 1)], name="benchmark")

    @contextmanager
    def _guard(self, what: str):
        """Turn a driver error into one line naming the store (never its password)."""
        try:
            yield
        except self._errors as err:
            raise StoreError(f"could not {what} {self.url}: {first_line(err)}") from None

    # -- reading --------------------------------------------------------------------------------
    def run_ids(self, benchmark: str | None = None) -> list[str]:
        with self._guard("read"):
            query = {} if benchmark is None else {"benchmark": benchmark}
            docs = self.db.runs.find(query, {"_id": 1, "created_at": 1}).sort([("created_at", 1), ("_id", 1)])
            return [d["_id"] for d in docs]

    def has_run(self, run_id: str) -> bool:
        with self._guard("read"):
            return self.db.runs.find_one({"_id": run_id}, {"_id": 1}) is not None

    def read_spec(self, run_id: str) -> RunSpec:
        with self._guard("read"):
            doc = self.db.runs.find_one({"_id": run_id})
        if doc is None:
            raise self.missing(run_id)
        return RunSpec.model_validate(doc["spec"])

    def read_log(self, run_id: str) -> list[Entry]:
        if not self.has_run(run_id):
            raise self.missing(run_id)
        self._check_imported(run_id)
        with self._guard("read"):
            rows = [(d["seq"], TrialRecord.model_validate(d["doc"])) for d in self.db.records.find({"run_id": run_id})]
            rows += [(d["seq"], Supersede.model_validate(d["doc"])) for d in self.db.markers.find({"run_id": run_id})]
        return [entry for _, entry in sorted(rows, key=lambda row: row[0])]

    # -- writing --------------------------------------------------------------------------------
    def create_run(self, run_id: str, spec: RunSpec, log_dir: Path | None = None, *,
                   importing: bool = False) -> "MongoRunWriter":
        check_run_id(run_id)
        from pymongo.errors import DuplicateKeyError

        mark = {"importing": True} if importing else {}  # in the same insert: no window without it
        with self._guard("create a run in"):
            try:
                self.db.runs.insert_one({"_id": run_id, "benchmark": spec.config.get("benchmark"),
                                         "created_at": spec.created_at, "spec": spec.model_dump(mode="json"), **mark})
            except DuplicateKeyError:
                raise StoreError(f"{self.url} already holds a run {run_id!r}; "
                                 f"continue it with `reinagent resume --store URL {run_id}`") from None
        return MongoRunWriter(self, run_id, log_dir, locked=True)

    def run_writer(self, run_id: str, log_dir: Path | None, *, locked: bool) -> "MongoRunWriter":
        return MongoRunWriter(self, run_id, log_dir, locked=locked)  # open_run, worker: base.DatabaseRuns

    def close(self) -> None:
        self.client.close()

    # -- import and removal: MongoDB without a replica set has no multi-document transaction ----
    def _importing(self, run_id: str) -> bool:
        with self._guard("read"):
            return bool((self.db.runs.find_one({"_id": run_id}, {"importing": 1}) or {}).get("importing"))

    def _check_imported(self, run_id: str) -> None:
        if self._importing(run_id):
            raise StoreError(f"run {run_id} in {self.url} is an import that did not finish; run the same "
                             "`reinagent store import` again to finish it (or `reinagent store rm` it)")

    def import_log(self, run_id: str, spec: RunSpec, entries: list[Entry]) -> None:
        """The run is marked `importing` until its last entry is in; a re-import of a marked run
        starts it again, so a killed import never passes for an ordinary partial run."""
        if self.has_run(check_run_id(run_id)) and self._importing(run_id):
            self.remove_run(run_id)
        writer = self.create_run(run_id, spec, importing=True)
        try:
            for entry in entries:
                (writer.append if isinstance(entry, Supersede) else writer.append_replacing)(entry)
            with self._guard(f"write run {run_id} to"):
                self.db.runs.update_one({"_id": run_id}, {"$unset": {"importing": ""}})
        finally:
            writer.close()

    def remove_run(self, run_id: str) -> None:
        if not self.has_run(check_run_id(run_id)):
            raise self.missing(run_id)
        writer = MongoRunWriter(self, run_id, None, locked=True)  # never under a live writer
        try:
            with self._guard(f"remove run {run_id} from"):
                # marked first: killed half-way, what is left is an unfinished import, not a run
                self.db.runs.update_one({"_id": run_id}, {"$set": {"importing": True}})
                for collection in (self.db.records, self.db.markers):
                    collection.delete_many({"run_id": run_id})
                self.db.generations.delete_many({"_id.run": run_id})
                self.db.counters.delete_one({"_id": run_id})
                self.db.runs.delete_one({"_id": run_id})
        finally:
            writer.close()


class MongoRunWriter(AsyncAppend):
    def __init__(self, store: MongoStore, run_id: str, log_dir: Path | None, *, locked: bool):
        self.store, self.run_id, self.db = store, run_id, store.db
        self.run_dir = Path(log_dir) if log_dir else None  # made only when errors.log is written
        self.owner = f"{secrets.token_hex(8)}"
        self._mutex = threading.Lock()
        self._lost: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        if locked:
            self._take_lease()

    # -- the lease ------------------------------------------------------------------------------
    def _take_lease(self) -> None:
        from pymongo.errors import DuplicateKeyError

        now, ttl = time.time(), self.store.lease_ttl_s
        lease = {"owner": self.owner, "expires": now + ttl}
        with self.store._guard("lock a run in"):
            try:
                self.db.leases.insert_one({"_id": self.run_id, **lease})
            except DuplicateKeyError:
                taken = self.db.leases.find_one_and_update({"_id": self.run_id, "expires": {"$lt": now}},
                                                           {"$set": lease})
                if taken is None:
                    held = self.db.leases.find_one({"_id": self.run_id}) or {}
                    left = max(0.0, float(held.get("expires", now)) - now)
                    raise StoreError(f"run {self.run_id} in {self.store.url} is in use by another writer (its lease "
                                     f"runs {left:.0f} s more unless renewed); wait for it to end or stop it, "
                                     "then try again") from None
        self._renewer = threading.Thread(target=self._renew, name=f"lease {self.run_id}", daemon=True)
        self._renewer.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.store.lease_ttl_s / 3) and self.renew_once():
            pass

    def renew_once(self) -> bool:
        """Extend the lease; False once another writer holds it (this writer then refuses writes)."""
        try:
            kept = self.db.leases.update_one({"_id": self.run_id, "owner": self.owner},
                                             {"$set": {"expires": time.time() + self.store.lease_ttl_s}})
        except self.store._errors:
            return True  # the next renewal tries again; writes fail meanwhile on their own
        if kept.matched_count == 0:
            self._lost = "its lease was taken by another writer"
            return False
        return True

    def _check(self) -> None:
        if self._lost:
            raise StoreError(f"run {self.run_id} in {self.store.url}: {self._lost}; this writer stopped")

    def close(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            with suppress(*self.store._errors):  # it expires on its own
                self.db.leases.delete_one({"_id": self.run_id, "owner": self.owner})
            self._renewer = None

    # -- writes ---------------------------------------------------------------------------------
    def _seq(self) -> int:
        from pymongo import ReturnDocument

        doc = self.db.counters.find_one_and_update({"_id": self.run_id}, {"$inc": {"seq": 1}}, upsert=True,
                                                   return_document=ReturnDocument.AFTER)
        return int(doc["seq"])

    def _generation(self, task_id: str, trial: int) -> int:
        doc = self.db.generations.find_one({"_id": {"run": self.run_id, "task": task_id, "trial": trial}})
        return int(doc["generation"]) if doc else 0

    def append(self, entry: Entry) -> None:
        with self._mutex, self.store._guard(f"write run {self.run_id} to"):
            self._check()
            if isinstance(entry, Supersede):
                self._mark(entry)
            else:
                self._insert(entry, replacing=False)

    def append_replacing(self, record: TrialRecord) -> None:
        with self._mutex, self.store._guard(f"write run {self.run_id} to"):
            self._insert(record, replacing=True)

    def update_spec(self, spec: RunSpec) -> None:
        with self._mutex, self.store._guard(f"write run {self.run_id} to"):
            self._check()
            self.db.runs.update_one({"_id": self.run_id}, {"$set": {"spec": spec.model_dump(mode="json")}})

    def _insert(self, rec: TrialRecord, *, replacing: bool) -> None:
        from pymongo.errors import DuplicateKeyError

        key = {"run_id": self.run_id, "task_id": rec.task_id, "trial": rec.trial, "sample": record_sample(rec),
               "generation": self._generation(rec.task_id, rec.trial)}
        doc = {**key, "revision": 0, "success": rec.success, "doc": valid_data(rec.model_dump(mode="json"))}
        with suppress(DuplicateKeyError):
            self.db.records.insert_one({**doc, "seq": self._seq()})
            return
        stored = next(iter(self.db.records.find(key).sort("revision", -1).limit(1)))
        old = TrialRecord.model_validate(stored["doc"])
        if old == rec or not (replacing or same_episode(old, rec)):
            return  # a repeated write, or another episode of a key already recorded: first wins
        with suppress(DuplicateKeyError):  # the same revision, written by a racing writer
            self.db.records.insert_one({**doc, "revision": stored["revision"] + 1, "seq": self._seq()})

    def _mark(self, marker: Supersede) -> None:
        for task_id, trial in marker.keys:  # first: a redo must never take the old key (see above)
            self.db.generations.update_one({"_id": {"run": self.run_id, "task": task_id, "trial": trial}},
                                           {"$inc": {"generation": 1}}, upsert=True)
        self.db.markers.insert_one({"run_id": self.run_id, "seq": self._seq(), "doc": marker.model_dump(mode="json")})

"""Chunk rows written by binary COPY, the fastest way PostgreSQL takes rows in.

Formatting every vector as text for a multi-row INSERT (and parsing it back on the server)
cost as much as computing the full-text vectors. ``COPY … FROM`` is refused on a table with
row-level security (the chunks table has it, forced), so the rows go by binary COPY into a
temporary table, then by one ``INSERT … SELECT`` into chunks: the tenant policy still checks
every row, and the generated columns (tsvector, the half-precision copy of the vector) are
computed as for any insert. The temporary table is made once per server connection
(``IF NOT EXISTS``, so behind a transaction-pooling proxy each server connection makes its
own) and empties itself at every commit: making and dropping one per transaction cost the
server twice as much.
"""
from __future__ import annotations

import io
import json
import struct
import uuid

import numpy as np

COLUMNS = ("organization_id", "document_id", "chunk_index", "heading", "content", "token_count",
           "embedding", "embedding_model", "metadata")
STAGE_SQL = ("SET LOCAL client_min_messages = warning; "  # no notice that the table exists already
             "CREATE TEMP TABLE IF NOT EXISTS kbf_chunk_rows (organization_id uuid, document_id uuid, "
             "chunk_index int, heading text, content text, token_count int, embedding vector, "
             "embedding_model varchar(120), metadata jsonb) ON COMMIT DELETE ROWS; "
             "DELETE FROM kbf_chunk_rows")  # empty already, unless this transaction copied before
_NULL = struct.pack(">i", -1)
_INT = struct.Struct(">ii")  # length 4, then the value


class ChunkCopy:
    """Rows in PostgreSQL's binary COPY format (header, tuples, trailer)."""

    def __init__(self):
        self.buf = io.BytesIO()
        self.buf.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
        self.rows = 0

    def add(self, org_id, doc_id, index: int, heading: str, content: str, token_count: int,
            vector: np.ndarray | None, model: str | None, metadata: dict | None) -> None:
        w = self.buf.write
        w(struct.pack(">h", len(COLUMNS)))
        w(_uuid(org_id))
        w(_uuid(doc_id))
        w(_INT.pack(4, int(index)))
        w(_text(heading or ""))
        w(_text(content))
        w(_INT.pack(4, int(token_count)))
        if vector is None:
            w(_NULL)
        else:  # pgvector's binary form: dimensions, an unused int16, big-endian float4s
            v = np.asarray(vector, dtype=">f4")
            w(struct.pack(">ihh", 4 + 4 * len(v), len(v), 0) + v.tobytes())
        w(_NULL if model is None else _text(model))
        w(_jsonb(metadata or {}))
        self.rows += 1

    def done(self) -> io.BytesIO:
        self.buf.write(struct.pack(">h", -1))
        self.buf.seek(0)
        return self.buf


def _uuid(v) -> bytes:
    return struct.pack(">i", 16) + (v if isinstance(v, uuid.UUID) else uuid.UUID(str(v))).bytes


def _text(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">i", len(b)) + b


def _jsonb(d: dict) -> bytes:
    b = b"\x01" + json.dumps(d).encode("utf-8")  # jsonb's binary form: version 1, then the text
    return struct.pack(">i", len(b)) + b


def insert_staged(cur, rows: ChunkCopy) -> int:
    """Copy the rows into the staging table and on into chunks; returns how many. The caller
    sends ``STAGE_SQL`` first, in the same transaction (with its other statements, in one
    round trip)."""
    if not rows.rows:
        return 0
    cur.copy_expert(f"COPY kbf_chunk_rows ({', '.join(COLUMNS)}) FROM STDIN WITH (FORMAT binary)", rows.done())
    cols = ", ".join(COLUMNS)
    cur.execute(f"INSERT INTO chunks ({cols}) SELECT {cols} FROM kbf_chunk_rows")
    return cur.rowcount

"""The conversation log: every conversation of an organization (admin test chat and public
widget), newest first, filtered, opened as its turns, exported.

A conversation is the turns that share a session id (the widget's, or the test chat's); a
turn logged without one is a conversation of its own, named by its chat log id. Filters apply
to turns: a conversation is listed when one of its turns matches all of them, and is then
shown whole.

"Gated" is the answerability decision: the traced ``answerability`` step records whether the
evidence was judged to answer the question (``debug["steps"]``); a ``debug["gate"]`` flag or a
gate reason counts too. Turns logged without such a decision are neither gated nor passed.
"""
from __future__ import annotations

import csv
import io
import uuid
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import String, and_, cast, exists, func, or_, select

from kbframework.errors import NotFound, ValidationFailed
from kbframework.models import AssistantKey, ChatFeedback, ChatLog, Organization

CHANNELS = ("admin", "public")
GATE_REASONS = ("not_answerable", "unanswerable", "gated", "below_answer_threshold")
GATE_FLAGS = ("answerable", "answer", "passed", "pass")  # a boolean under debug["gate"]
EXPORT_LIMIT = 50_000
MAX_TURNS = 500


def conversation_key():
    return func.coalesce(ChatLog.session_id, cast(ChatLog.id, String))


def gate_decision(debug: dict | None, reason: str | None = None) -> str | None:
    """"gated", "passed" or None (no decision recorded)."""
    if reason in GATE_REASONS:
        return "gated"
    for step in (debug or {}).get("steps") or []:  # the traced answerability step
        if isinstance(step, dict) and step.get("name") == "answerability" and \
                isinstance((step.get("output") or {}).get("answerable"), bool):
            return "passed" if step["output"]["answerable"] else "gated"
    gate = (debug or {}).get("gate")
    if isinstance(gate, dict):
        for k in GATE_FLAGS:
            if isinstance(gate.get(k), bool):
                return "passed" if gate[k] else "gated"
        if gate.get("decision") in ("fallback", "refuse", "gated"):
            return "gated"
        if gate.get("decision") in ("answer", "passed"):
            return "passed"
    return None


def _gated_sql():
    g = ChatLog.retrieval_debug["gate"]
    return or_(ChatLog.reason.in_(GATE_REASONS),
               ChatLog.retrieval_debug["steps"].contains([{"name": "answerability", "output": {"answerable": False}}]), g["decision"].astext.in_(("fallback", "refuse", "gated")),
               *[g[k].astext == "false" for k in GATE_FLAGS])


def parse_filters(args, tz: str) -> dict:
    """Query-string filters → checked values (a bad one is a 400 naming it)."""
    def flag(name):
        return (args.get(name) or "").strip().lower() in ("1", "true", "on", "yes")

    f = {"channel": (args.get("channel") or "").strip() or None, "key": (args.get("key") or "").strip() or None,
         "from": (args.get("from") or "").strip() or None, "to": (args.get("to") or "").strip() or None,
         "thumbs_down": flag("thumbs_down"), "zero_result": flag("zero_result"), "gated": flag("gated"),
         "q": (args.get("q") or "").strip()[:200] or None}
    if f["channel"] and f["channel"] not in CHANNELS:
        raise ValidationFailed(f"Channel must be one of: {', '.join(CHANNELS)}.", details={"channel": ["unknown"]})
    if f["key"]:
        try:
            uuid.UUID(f["key"])
        except ValueError:
            raise ValidationFailed("'key' must be an assistant key id.", details={"key": ["not an id"]})
    f["_start"], f["_end"] = _day(f["from"], tz, "from"), _day(f["to"], tz, "to", end=True)
    if f["_start"] and f["_end"] and f["_start"] >= f["_end"]:
        raise ValidationFailed("'from' must be before 'to'.", details={"from": ["after 'to'"]})
    return f


def _day(value, tz, name, end=False):
    if not value:
        return None
    try:
        d = date.fromisoformat(value[:10])
    except ValueError:
        raise ValidationFailed(f"'{name}' must be a date like 2026-11-30.", details={name: ["not a date"]})
    start = datetime(d.year, d.month, d.day, tzinfo=ZoneInfo(tz))
    return start + timedelta(days=1) if end else start


def public_filters(f: dict) -> dict:
    """The filters as a query string would carry them (for links and the export)."""
    out = {k: v for k, v in f.items() if not k.startswith("_") and v not in (None, False, "")}
    return {k: ("1" if v is True else v) for k, v in out.items()}


def _turn_conditions(oid, f: dict) -> list:
    conds = [ChatLog.organization_id == oid]
    if f.get("channel"):
        conds.append(ChatLog.channel == f["channel"])
    if f.get("key"):
        conds.append(ChatLog.assistant_key_id == uuid.UUID(f["key"]))
    if f.get("_start"):
        conds.append(ChatLog.created_at >= f["_start"])
    if f.get("_end"):
        conds.append(ChatLog.created_at < f["_end"])
    if f.get("thumbs_down"):
        conds.append(exists(select(1).where(ChatFeedback.chat_log_id == ChatLog.id, ChatFeedback.rating == "down")))
    if f.get("zero_result"):
        conds.append(ChatLog.zero_result.is_(True))
    if f.get("gated"):
        conds.append(_gated_sql())
    if f.get("q"):
        like = "%" + f["q"].replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        conds.append(or_(ChatLog.query.ilike(like), ChatLog.final_answer.ilike(like),
                         ChatLog.rewritten_query.ilike(like), ChatLog.session_id == f["q"]))
    return conds


def _matching(oid, f):
    key = conversation_key()
    return select(key).where(and_(*_turn_conditions(oid, f))).distinct()


def list_conversations(s, oid, f: dict, page: int = 1, per_page: int = 25) -> dict:
    key = conversation_key().label("conv")
    down = select(func.count()).where(ChatFeedback.chat_log_id == ChatLog.id,
                                      ChatFeedback.rating == "down").correlate(ChatLog).scalar_subquery()
    base = (select(key, func.count().label("turns"), func.min(ChatLog.created_at).label("started"),
                   func.max(ChatLog.created_at).label("last"),
                   func.array_agg(func.distinct(ChatLog.channel)).label("channels"),
                   func.array_agg(func.distinct(ChatLog.assistant_key_id)).label("keys"),
                   func.bool_or(ChatLog.zero_result).label("zero"),
                   func.bool_or(_gated_sql()).label("gated"),
                   func.sum(down).label("down"),
                   (func.array_agg(ChatLog.query.op("ORDER BY")(ChatLog.created_at)))[1].label("first_q"),
                   (func.array_agg(ChatLog.final_answer.op("ORDER BY")(ChatLog.created_at.desc())))[1]
                   .label("last_answer"))
            .where(ChatLog.organization_id == oid, conversation_key().in_(_matching(oid, f)))
            .group_by(conversation_key()))
    total = s.scalar(select(func.count()).select_from(_matching(oid, f).subquery())) or 0
    per_page = min(100, max(1, int(per_page or 25)))
    pages = max(1, -(-total // per_page))
    page = min(max(1, int(page or 1)), pages)
    rows = s.execute(base.order_by(func.max(ChatLog.created_at).desc(), key)
                     .limit(per_page).offset((page - 1) * per_page)).all()
    names = key_names(s, oid)
    items = [{"id": r.conv, "turns": r.turns, "started_at": r.started.isoformat(), "last_at": r.last.isoformat(),
              "channels": sorted(c for c in r.channels if c), "keys": [
                  {"id": str(k), "name": names.get(k, "(deleted key)")} for k in r.keys if k],
              "zero_result": bool(r.zero), "gated": bool(r.gated), "thumbs_down": int(r.down or 0),
              "first_question": r.first_q, "last_answer": (r.last_answer or "")[:300]} for r in rows]
    return {"items": items, "page": page, "per_page": per_page, "total": total, "pages": pages}


def key_names(s, oid) -> dict:
    return dict(s.execute(select(AssistantKey.id, AssistantKey.name).where(AssistantKey.organization_id == oid)).all())


def _conversation_logs(s, oid, conv_id: str) -> list[ChatLog]:
    rows = list(s.scalars(select(ChatLog).where(ChatLog.organization_id == oid, conversation_key() == conv_id)
                          .order_by(ChatLog.created_at, ChatLog.id).limit(MAX_TURNS)))
    if not rows:
        raise NotFound("No such conversation in this organization.")
    return rows


def turn_to_dict(log: ChatLog, feedback: list[ChatFeedback], names: dict) -> dict:
    return {"id": str(log.id), "created_at": log.created_at.isoformat(), "channel": log.channel,
            "session_id": log.session_id, "key_id": str(log.assistant_key_id) if log.assistant_key_id else None,
            "key_name": names.get(log.assistant_key_id) if log.assistant_key_id else None,
            "query": log.query, "rewritten_query": log.rewritten_query, "answer": log.final_answer,
            "mode": log.mode, "model": log.model, "tokens_in": log.tokens_in, "tokens_out": log.tokens_out,
            "zero_result": log.zero_result, "reason": log.reason, "latency_ms": log.latency_ms,
            "gate": gate_decision(log.retrieval_debug, log.reason), "flags": log.flags or [],
            "used_document_ids": log.used_document_ids or [],
            "feedback": [{"id": str(fb.id), "rating": fb.rating, "comment": fb.comment,
                          "created_at": fb.created_at.isoformat(),
                          "addressed_at": fb.addressed_at.isoformat() if fb.addressed_at else None}
                         for fb in feedback]}


def get_conversation(s, oid, conv_id: str) -> tuple[dict, list[ChatLog]]:
    logs = _conversation_logs(s, oid, conv_id)
    fbs: dict = {}
    for fb in s.scalars(select(ChatFeedback).where(ChatFeedback.chat_log_id.in_([x.id for x in logs]))
                        .order_by(ChatFeedback.created_at)):
        fbs.setdefault(fb.chat_log_id, []).append(fb)
    names = key_names(s, oid)
    turns = [turn_to_dict(x, fbs.get(x.id, []), names) for x in logs]
    return {"id": conv_id, "session_id": logs[0].session_id, "turns": turns,
            "channels": sorted({t["channel"] for t in turns}),
            "started_at": turns[0]["created_at"], "last_at": turns[-1]["created_at"]}, logs


EXPORT_COLUMNS = ("conversation", "turn", "created_at", "channel", "key", "session_id", "query", "answer",
                  "zero_result", "reason", "gate", "thumbs", "comments", "model", "tokens_in", "tokens_out")


def export_turns(s, oid, f: dict) -> list[dict]:
    """Every turn of every conversation the filters select, oldest turn first per conversation."""
    convs = _matching(oid, f).limit(EXPORT_LIMIT)
    logs = list(s.scalars(select(ChatLog).where(ChatLog.organization_id == oid, conversation_key().in_(convs))
                          .order_by(conversation_key(), ChatLog.created_at).limit(EXPORT_LIMIT)))
    fbs: dict = {}
    if logs:
        for fb in s.scalars(select(ChatFeedback).where(ChatFeedback.organization_id == oid,
                                                       ChatFeedback.chat_log_id.in_([x.id for x in logs]))):
            fbs.setdefault(fb.chat_log_id, []).append(fb)
    names = key_names(s, oid)
    out, n, last = [], 0, None
    for x in logs:
        conv = x.session_id or str(x.id)
        n = n + 1 if conv == last else 1
        last = conv
        fb = fbs.get(x.id, [])
        out.append({"conversation": conv, "turn": n, "created_at": x.created_at.isoformat(), "channel": x.channel,
                    "key": names.get(x.assistant_key_id) if x.assistant_key_id else None,
                    "session_id": x.session_id, "query": x.query, "answer": x.final_answer,
                    "zero_result": x.zero_result, "reason": x.reason, "gate": gate_decision(x.retrieval_debug, x.reason),
                    "thumbs": " ".join(b.rating for b in fb) or None,
                    "comments": " | ".join(b.comment for b in fb if b.comment) or None, "model": x.model,
                    "tokens_in": x.tokens_in, "tokens_out": x.tokens_out})
    return out


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=EXPORT_COLUMNS, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        # a cell starting with = + - @ is text, not a formula, in a spreadsheet
        w.writerow({k: ("'" + v if isinstance(v, str) and v[:1] in "=+-@" else v) for k, v in r.items()})
    return buf.getvalue()


def org_timezone(s, oid) -> str:
    o = s.get(Organization, oid)
    return o.timezone if o else "UTC"


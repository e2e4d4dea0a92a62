"""Demo knowledge shipped with the project: a shop and a nightlife site in one organization.

Event dates are computed from today each time the demo is loaded (``make run`` runs ``kbf demo``),
so the events are always upcoming: "tonight", "tomorrow", the coming Saturday and Sunday."""
from __future__ import annotations

import json
import secrets
from datetime import datetime, timedelta, time
from pathlib import Path
from zoneinfo import ZoneInfo

from sqlalchemy import select

from kbframework.orgs.accounts import create_org, create_user, ensure_source
from kbframework.db import session_scope
from kbframework.models import Organization, Setting

DATA = Path(__file__).parent / "knowledge.json"


def _event_times(when: dict, tz: str, now: datetime):
    local = now.astimezone(ZoneInfo(tz))
    if "days_ahead_weekday" in when:
        days = (when["days_ahead_weekday"] - local.weekday()) % 7
    else:
        days = when.get("days_ahead", 0)
    day = (local + timedelta(days=days)).date()
    hh, mm = map(int, when["start"].split(":"))
    start = datetime.combine(day, time(hh, mm), tzinfo=ZoneInfo(tz))
    return start, start + timedelta(hours=when.get("hours", 4))


def seed_demo(email: str = "admin@demo.local", password: str | None = None) -> dict:
    from kbframework.sources import documents as docs
    from kbframework.ingest.queue import queue_ingest
    from kbframework.orgs.keys import create_key, list_keys
    from kbframework.sources.apply import apply_draft
    from kbframework.types import DocumentDraft

    data = json.loads(DATA.read_text())
    o = data["organization"]
    password = password or secrets.token_urlsafe(12)
    now = datetime.now(ZoneInfo("UTC"))
    with session_scope() as s:
        org = s.scalar(select(Organization).where(Organization.slug == o["slug"]))
        if org is None:
            org = create_org(s, o["name"], o["timezone"], o["slug"])
            st = s.scalar(select(Setting).where(Setting.organization_id == org.id))
            st.brand = "Demo Shop & Nights"
        st = s.scalar(select(Setting).where(Setting.organization_id == org.id))
        if st.preset == "support":
            # the search preset renders product, event and article cards with no role boost: a
            # newcomer sees everything the product does (earlier demos used "support": articles only)
            st.preset = "search"
        create_user(s, email, password, org, "admin")
        src = ensure_source(s, org.id, "manual", "Manual knowledge")
        ids = []
        for i, d in enumerate(data["documents"]):
            start = end = None
            if d.get("when"):
                start, end = _event_times(d["when"], o["timezone"], now)
            draft = DocumentDraft(title=d["title"], normalized_content=d["body"], type="manual",
                                  document_role=d["role"], external_id=f"demo-{i}", tags=d.get("tags", []),
                                  source_url=d.get("source_url"), primary_image_url=d.get("image_url"),
                                  metadata=d.get("metadata", {}), event_start=start, event_end=end,
                                  venue=d.get("venue"), city=d.get("city"), raw_content=d["body"])
            doc, action = apply_draft(s, src, draft, force=True)
            if doc.status in ("expired", "deleted"):
                doc.status = "syncing"
            ids.append(doc.id)
        keys = list_keys(s, org.id)
        key = keys[0] if keys else create_key(s, org.id, ["http://127.0.0.1:5000", "http://localhost:5000"],
                                              "Demo website")
        org_id, key_value, tz = org.id, key.key, org.timezone
    results = queue_ingest(ids, inline=True)
    return {"org": o["slug"], "tz": tz, "email": email, "password": password, "key": key_value,
            "documents": len(ids), "chunks": sum(r.chunks for r in results), "organization_id": str(org_id)}

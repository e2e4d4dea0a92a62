"""Usage ledger and monthly budgets, with the LLM path through a local OpenAI-protocol server."""
import logging
import threading
from datetime import datetime, timezone
from decimal import Decimal

import pytest
from sqlalchemy import func, select

from kbframework.db import session_scope
from kbframework.models import Setting, UsageLedger
from fakes.openai_server import FakeOpenAI, serving_as_the_llm


@pytest.fixture
def fake_llm(kb_services):
    with serving_as_the_llm(FakeOpenAI()) as srv:
        yield srv


def note(admin, title="Return policy", body="You can return items within 30 days for a full refund."):
    r = admin.post("/api/admin/v1/documents/manual?wait=1", json={"title": title, "body": body})
    assert r.status_code == 201
    return r.get_json()


def set_budget(org_id, tokens=None, cost=None):
    from kbframework.testing import set_org_settings

    set_org_settings({"id": org_id}, budget_unit="tokens" if tokens else "cost", budget_limit=tokens or cost)


def ledger(org_id):
    with session_scope() as s:
        return s.execute(select(UsageLedger.purpose, UsageLedger.provider, UsageLedger.tokens_in,
                                UsageLedger.tokens_out, UsageLedger.cost_usd)
                         .where(UsageLedger.organization_id == org_id).order_by(UsageLedger.id)).all()


def test_every_model_call_writes_a_ledger_row(kb_admin, fake_llm):
    note(kb_admin)
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "return policy?"}).get_json()
    assert out["answer"].startswith("Here is the answer") and out["debug"]["llm"]["used_llm"] is True
    rows = ledger(kb_admin.org["id"])
    purposes = {r.purpose: r for r in rows}
    assert purposes["ingest_embedding"].provider == "wordllama" and purposes["ingest_embedding"].cost_usd == 0
    assert purposes["query_embedding"].tokens_in > 0 and purposes["query_embedding"].cost_usd == 0
    c = purposes["completion"]
    assert (c.provider, c.tokens_in, c.tokens_out) == ("openai", 120, 30)
    assert c.cost_usd == Decimal("0.000036")  # 120 × $0.15/M + 30 × $0.60/M


def used(org):
    """This month's tokens, every metered call (what a token budget counts)."""
    from kbframework.orgs import budget

    return budget.status(org)["all_tokens"]


def test_soft_warning_once_and_hard_stop_without_model_call(kb_admin, fake_llm, caplog):
    from kbframework.orgs import budget

    note(kb_admin)
    org = kb_admin.org["id"]
    base = used(org)  # the note's embedding
    kb_admin.post("/api/admin/v1/chat", json={"question": "return policy?"})
    per_q = used(org) - base  # query embedding + planner + completion
    assert per_q >= 150
    set_budget(org, tokens=base + int(per_q * 2.5))
    kb_admin.post("/api/admin/v1/chat", json={"question": "refund?"})  # 2 × per_q = 80 %
    with caplog.at_level(logging.WARNING, logger="kbframework.orgs.budget"):
        assert budget.status(org)["state"] == "warning"
        budget.status(org)
        kb_admin.post("/api/admin/v1/chat", json={"question": "returns within days?"})  # → 120 %
        budget.status(org)
    warnings = [r for r in caplog.records if "warning" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    before = fake_llm.completions()
    assert budget.status(org)["state"] == "exceeded"
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "return policy?"}).get_json()
    assert out["answer"] == budget.EXCEEDED_TEXT and out["debug"]["reason"] == "budget_exceeded"
    assert fake_llm.completions() == before
    from kbframework.orgs.keys import create_key

    with session_scope() as s:
        key = create_key(s, org, ["https://shop.example"]).key
    from kbframework.web import create_app  # noqa: F401

    r = kb_admin.client.post(f"/api/embed/v1/{key}/chat", json={"message": "return policy?"},
                             headers={"Origin": "https://shop.example"})
    assert r.status_code == 200 and r.get_json()["answer"] == budget.EXCEEDED_TEXT
    assert fake_llm.completions() == before


def test_month_resets_in_the_organizations_time_zone(kb_org):
    from kbframework.clock import month_bounds
    from kbframework.orgs import budget

    org = kb_org["id"]  # Europe/Belgrade (UTC+1 in winter)
    with session_scope() as s:
        s.add(UsageLedger(organization_id=org, purpose="completion", provider="openai", model="gpt-4o-mini",
                          tokens_in=100, tokens_out=0, cost_usd=0,
                          created_at=datetime(2026, 11, 30, 22, 30, tzinfo=timezone.utc)))  # Dec 1, 23:30? no: 23:30 Nov 30 local
        s.add(UsageLedger(organization_id=org, purpose="completion", provider="openai", model="gpt-4o-mini",
                          tokens_in=7, tokens_out=0, cost_usd=0,
                          created_at=datetime(2026, 11, 30, 23, 30, tzinfo=timezone.utc)))  # Dec 1, 00:30 local
    with session_scope() as s:
        nov = budget.usage_summary(s, org, "2026-11")["totals"]["billable_tokens"]
        dec = budget.usage_summary(s, org, "2026-12")["totals"]["billable_tokens"]
    assert (nov, dec) == (100, 7)
    start, end, label = month_bounds("Europe/Belgrade", datetime(2026, 11, 30, 23, 30, tzinfo=timezone.utc))
    assert label == "2026-12" and start == datetime(2026, 11, 30, 23, 0, tzinfo=timezone.utc)


def test_concurrent_requests_overshoot_by_at_most_one(kb_admin, fake_llm):
    from kbframework.retrieval.answer import answer

    note(kb_admin)
    org = kb_admin.org["id"]
    base = used(org)
    answer(org, "return policy?", channel="public")
    per_q = used(org) - base
    set_budget(org, tokens=base + per_q * 5)  # room for 4 more answers
    fake_llm.delay = 0.05
    threads = [threading.Thread(target=answer, args=(org, "return policy?"), kwargs={"channel": "public"})
               for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    made = fake_llm.completions() - 1
    assert 4 <= made <= 5, made
    assert used(org) - base <= per_q * 5 + per_q


def test_cli_usage(kb_admin, fake_llm):
    import json
    import subprocess
    import sys
    from pathlib import Path

    note(kb_admin)
    kb_admin.post("/api/admin/v1/chat", json={"question": "return policy?"})
    kbf = str(Path(sys.executable).parent / "kbf")
    r = subprocess.run([kbf, "usage", "--org", kb_admin.org["slug"], "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert {p["purpose"] for p in data["by_purpose"]} >= {"completion", "query_embedding", "ingest_embedding"}
    assert data["totals"]["billable_tokens"] >= 150
    r = subprocess.run([kbf, "usage", "--org", kb_admin.org["slug"], "--month", "2026-13"], capture_output=True, text=True)
    assert r.returncode != 0 and "--month" in r.stderr


def test_ledger_failure_never_breaks_an_answer(kb_admin, fake_llm, monkeypatch):
    from kbframework.orgs import usage

    note(kb_admin)

    def broken(*a, **k):
        raise RuntimeError("ledger table locked")

    monkeypatch.setattr(usage, "UsageLedger", broken)
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "return policy?"})
    assert r.status_code == 200 and r.get_json()["answer"].startswith("Here is the answer")


def test_follow_up_rewrite_is_metered(kb_admin, fake_llm):
    note(kb_admin)
    history = [{"role": "user", "content": "what is your return policy?"},
               {"role": "assistant", "content": "You can return items within 30 days."}]
    r = kb_admin.post("/api/admin/v1/chat", json={"question": "and for sale items?", "history": history})
    assert r.status_code == 200
    assert r.get_json()["debug"]["rewrite"] == "llm"
    rows = [row for row in ledger(kb_admin.org["id"]) if row.purpose == "rewrite"]
    assert len(rows) == 1 and rows[0].provider == "openai" and rows[0].tokens_in == 120


def test_a_token_budget_counts_offline_calls_and_stops_every_model_call(kb_admin, monkeypatch):
    """Offline providers (WordLlama embeddings, the extractive answerer) are metered: a budget
    of one token stops the public chat, and at the stop not even the query is embedded."""
    from kbframework.hooks import registry
    from kbframework.orgs import budget
    from kbframework.orgs.keys import create_key

    note(kb_admin)
    org = kb_admin.org["id"]
    out = kb_admin.post("/api/admin/v1/chat", json={"question": "return policy?"}).get_json()
    assert out["debug"]["llm"]["provider"] == "extractive"
    purposes = {r.purpose: r for r in ledger(org)}
    assert purposes["completion"].provider == "extractive" and purposes["completion"].tokens_in > 0
    assert purposes["completion"].cost_usd == 0 and purposes["query_embedding"].tokens_in > 0
    set_budget(org, tokens=1)
    rows_before = len(ledger(org))
    calls = []
    embedder = registry.embedder()
    real = embedder.embed_batch
    monkeypatch.setattr(embedder, "embed_batch", lambda texts, *a, **k: calls.append(texts) or real(texts, *a, **k))
    with session_scope() as s:
        key = create_key(s, org, ["https://shop.example"]).key
    r = kb_admin.client.post(f"/api/embed/v1/{key}/chat", json={"message": "return policy?"},
                             headers={"Origin": "https://shop.example"})
    assert r.status_code == 200 and r.get_json()["answer"] == budget.EXCEEDED_TEXT
    assert calls == [] and len(ledger(org)) == rows_before  # no embedding, no completion, nothing metered


def test_a_money_budget_ignores_offline_calls(kb_admin):
    from kbframework.orgs import budget

    note(kb_admin)
    org = kb_admin.org["id"]
    set_budget(org, cost=0.01)
    for q in ("return policy?", "refund?"):
        out = kb_admin.post("/api/admin/v1/chat", json={"question": q}).get_json()
        assert out["answer"] != budget.EXCEEDED_TEXT
    st = budget.status(org)
    assert st["budget"]["unit"] == "cost" and st["used"] == 0 and st["all_tokens"] > 0 and st["state"] == "ok"


def test_budget_validation_names_the_unit(kb_admin):
    r = kb_admin.put("/api/admin/v1/settings", json={"budget_unit": "tokens"})
    assert r.status_code == 400 and "budget_limit" in r.get_json()["error"]["details"]
    r = kb_admin.put("/api/admin/v1/settings", json={"budget_unit": "euros", "budget_limit": 5})
    assert r.status_code == 400 and "one of: none, tokens, cost" in str(r.get_json())
    r = kb_admin.put("/api/admin/v1/settings", json={"budget_unit": "cost", "budget_limit": -1})
    assert r.status_code == 400
    r = kb_admin.put("/api/admin/v1/settings", json={"budget_unit": "cost", "budget_limit": 25, "budget_soft_pct": 90})
    assert r.status_code == 200
    st = r.get_json()
    assert (st["budget_unit"], st["budget_limit"], st["budget_soft_pct"]) == ("cost", 25.0, 90)
    # the old nested form is still understood
    r = kb_admin.put("/api/admin/v1/settings", json={"extra": {"budget": {"monthly_tokens": 5000}}})
    assert r.status_code == 200 and (r.get_json()["budget_unit"], r.get_json()["budget_limit"]) == ("tokens", 5000.0)


def test_a_turn_that_fails_after_the_query_embedding_still_records_it(kb_admin, monkeypatch):
    """The query embedding's row is written at the turn's end, off the searches' time: a turn
    that breaks between the two writes it all the same, once."""
    from kbframework.retrieval import steps

    note(kb_admin)
    org = kb_admin.org["id"]
    before = sum(1 for r in ledger(org) if r.purpose == "query_embedding")

    def broken(s, t):
        raise RuntimeError("fusion broke")

    monkeypatch.setattr(steps, "STEPS", tuple(steps.Step(st.name, broken, st.when) if st.name == "rrf" else st
                                              for st in steps.STEPS))
    with pytest.raises(RuntimeError, match="fusion broke"):
        with session_scope() as s:
            t = steps.Turn(org_id=org, question="return policy?", now=datetime.now(timezone.utc), retrieval_only=True)
            steps.run_steps(s, t, steps.STEPS)
    assert sum(1 for r in ledger(org) if r.purpose == "query_embedding") == before + 1
    assert t.usage == []

"""Declared settings: one list drives the API's validation, the admin form, ``kbf org set`` and
the README's table; operator-only settings stay with the operator unless delegated; the
migration moves the old free-form ``settings.extra`` into the declared columns."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select, text

from kbframework import settings as declared
from kbframework.db import session_scope
from kbframework.models import Setting

KBF = str(Path(sys.executable).parent / "kbf")
ROOT = Path(__file__).resolve().parents[1]


def kbf(*args):
    return subprocess.run([KBF, *args], capture_output=True, text=True, timeout=120)


def test_readme_settings_table_is_the_declared_list():
    readme = (ROOT / "README.md").read_text()
    assert declared.markdown_table() in readme, "regenerate: python -c 'from kbframework.settings " \
                                                "import markdown_table; print(markdown_table())'"


def test_every_declared_setting_is_stored_and_has_help():
    from kbframework.models import Organization

    for d in declared.SETTINGS:
        holder = Organization if d.stored_on == "organization" else Setting
        assert d.name in holder.__table__.c, d.name
        assert d.help and d.label, d.name
        if d.default is not None and d.type != "choice":
            assert declared.coerce(d, d.default) == d.default, d.name


def test_coerce_checks_type_and_range():
    d = declared.BY_NAME
    assert declared.coerce(d["retention_days"], "30", from_text=True) == 30
    assert declared.coerce(d["allow_private_network"], "yes", from_text=True) is True
    assert declared.coerce(d["brand"], "", from_text=True) is None
    for name, bad in (("retention_days", "0"), ("retention_days", "2.5"), ("similarity_floor", "2"),
                      ("budget_unit", "euros"), ("night_cutoff", "25:00"), ("chunking", "[]"),
                      ("chunking", '{"max_tokens": "big"}'), ("prices", '{"m": [1]}'), ("branding_color", "red")):
        with pytest.raises(ValueError):
            declared.coerce(d[name], bad, from_text=True)


def test_api_validates_refuses_unknown_and_operator_settings(kb_admin, monkeypatch):
    r = kb_admin.put("/api/admin/v1/settings", json={"retention_days": 30, "weekend_starts_friday": True})
    assert r.status_code == 200 and r.get_json()["retention_days"] == 30 and r.get_json()["weekend_starts_friday"]
    r = kb_admin.put("/api/admin/v1/settings", json={"retention_days": 0})
    assert r.status_code == 400 and "retention_days" in r.get_json()["error"]["details"]
    r = kb_admin.put("/api/admin/v1/settings", json={"colour_of_the_day": "blue"})
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "unknown_setting"
    # the operator keeps private network access unless they delegate it
    monkeypatch.delenv("KB_TENANT_PRIVATE_NETWORK", raising=False)
    r = kb_admin.put("/api/admin/v1/settings", json={"allow_private_network": True})
    assert r.status_code == 403 and "kbf org set" in r.get_json()["error"]["message"]
    st = kb_admin.get("/api/admin/v1/settings").get_json()
    assert st["allow_private_network"] is False
    assert next(d for d in st["declared"] if d["name"] == "allow_private_network")["editable"] is False
    r = kb_admin.put("/api/admin/v1/settings", json={"allow_private_network": False, "retention_days": 31})
    assert r.status_code == 200  # sending the unchanged value is no change
    monkeypatch.setenv("KB_TENANT_PRIVATE_NETWORK", "1")
    r = kb_admin.put("/api/admin/v1/settings", json={"allow_private_network": True})
    assert r.status_code == 200 and r.get_json()["allow_private_network"] is True


def test_admin_form_shows_operator_setting_read_only_unless_delegated(kb_admin, monkeypatch):
    monkeypatch.delenv("KB_TENANT_PRIVATE_NETWORK", raising=False)
    page = kb_admin.get("/admin/settings").get_data(as_text=True)
    assert 'name="retention_days"' in page and 'name="budget_unit"' in page
    assert 'id="allow_private_network" name="allow_private_network" type="checkbox" value="true" disabled' in page
    assert "kbf org set test-org allow_private_network=" in page
    monkeypatch.setenv("KB_TENANT_PRIVATE_NETWORK", "1")
    page = kb_admin.get("/admin/settings").get_data(as_text=True)
    assert 'id="allow_private_network" name="allow_private_network" type="checkbox" value="true">' in page


def test_cli_org_set_show_and_list(kb_admin):
    slug = kb_admin.org["slug"]
    r = kbf("org", "set", slug, "retention_days=14", "allow_private_network=true", "brand=Shop & Co",
            "budget_unit=tokens", "budget_limit=5000")
    assert r.returncode == 0, r.stderr
    assert "retention_days = 14" in r.stdout and "allow_private_network = true" in r.stdout
    with session_scope() as s:
        st = s.scalar(select(Setting).where(Setting.organization_id == kb_admin.org["id"]))
        assert (st.retention_days, st.allow_private_network, st.brand, st.budget_unit, st.budget_limit) == \
               (14, True, "Shop & Co", "tokens", 5000.0)
    r = kbf("org", "set", slug, "brand=")
    assert r.returncode == 0 and "brand = null" in r.stdout
    for bad, said in ((["retention_days=lots"], "whole number"), (["nonsense=1"], "Unknown setting"),
                      (["retention_days"], "KEY=VALUE")):
        r = kbf("org", "set", slug, *bad)
        assert r.returncode != 0 and said in r.stderr, r.stderr
    r = kbf("org", "show", slug, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["retention_days"] == 14
    r = kbf("org", "list", "--json")
    assert r.returncode == 0 and [o["slug"] for o in json.loads(r.stdout)] == [slug]
    r = kbf("org", "set", "no-such-org", "brand=x")
    assert r.returncode != 0 and "no-such-org" in r.stderr


def test_cli_budget_set(kb_admin):
    from kbframework.orgs import budget

    slug, org = kb_admin.org["slug"], kb_admin.org["id"]
    r = kbf("budget", "set", "--org", slug, "--tokens", "2000000", "--soft", "75%")
    assert r.returncode == 0, r.stderr
    assert "of 2,000,000 tokens" in r.stdout and "warning at 75%" in r.stdout
    b = budget.status(org)["budget"]
    assert (b["unit"], b["limit"], b["soft_pct"], b["hard_stop"]) == ("tokens", 2000000.0, 75.0, True)
    r = kbf("budget", "set", "--org", slug, "--cost", "12.5", "--no-hard-stop")
    assert r.returncode == 0 and "of $12.50" in r.stdout and "no hard stop" in r.stdout
    assert budget.status(org)["budget"]["unit"] == "cost"
    for bad in (["--tokens", "5", "--cost", "1"], [], ["--tokens", "0"], ["--tokens", "9", "--soft", "120%"]):
        r = kbf("budget", "set", "--org", slug, *bad)
        assert r.returncode != 0 and r.stderr.startswith("error:"), (bad, r.stderr)
    r = kbf("budget", "set", "--org", slug, "--none")
    assert r.returncode == 0 and "no budget" in r.stdout
    assert budget.status(org)["state"] == "unlimited"


def test_migration_moves_extra_into_declared_settings(kb_services, kb_clean):
    from kbframework.migrate import downgrade, upgrade

    downgrade("0005_vector_indexes")
    try:
        with session_scope() as s:
            oid = s.execute(text("INSERT INTO organizations (name, slug) VALUES ('Old', 'old') RETURNING id")).scalar()
            extra = {"branding": {"color": "#112233", "title": "Old shop", "logo": None},
                     "fallback_text": "Call us.", "allow_private_network": True, "weekend_starts_friday": True,
                     "char_budget": 9000, "chunking": {"max_tokens": 600}, "prices": {"m": [1, 2]},
                     "budget": {"monthly_tokens": 123456, "monthly_usd": 9, "soft_pct": 70, "hard_stop": False},
                     "something_nobody_declared": 1}
            s.execute(text("INSERT INTO settings (organization_id, extra) VALUES (:o, CAST(:e AS jsonb))"),
                      {"o": oid, "e": json.dumps(extra)})
        upgrade()
        with session_scope() as s:
            values = declared.current(s, oid)
        assert values["branding_color"] == "#112233" and values["branding_title"] == "Old shop"
        assert values["branding_logo"] is None and values["fallback_text"] == "Call us."
        assert values["allow_private_network"] is True and values["weekend_starts_friday"] is True
        assert values["char_budget"] == 9000 and values["chunking"] == {"max_tokens": 600}
        assert values["prices"] == {"m": [1, 2]}
        assert (values["budget_unit"], values["budget_limit"], values["budget_soft_pct"],
                values["budget_hard_stop"]) == ("tokens", 123456.0, 70, False)
        assert values["retention_days"] == 90
        downgrade("0005_vector_indexes")  # and back: the declared values return to extra
        with session_scope() as s:
            back = s.execute(text("SELECT extra FROM settings WHERE organization_id = :o"), {"o": oid}).scalar()
        assert back["branding"] == {"color": "#112233", "title": "Old shop"} and back["allow_private_network"]
        assert back["budget"]["monthly_tokens"] == 123456.0
    finally:
        upgrade()

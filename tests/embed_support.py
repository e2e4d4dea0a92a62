"""Helpers for the embed tests: real web server processes (gunicorn) on the test services,
a small catalogue, and HTTP calls from a chosen loopback source address (a second "visitor IP")."""
from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = Path(sys.executable).parent / "gunicorn"

XSS_TITLE = 'Red Dress <img src=x onerror="window.__kbf_xss=1"> Deluxe'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def service_env(**extra) -> dict:
    """The environment of a web process that uses the test services (kb_services must be active)."""
    from kbframework.config import get_config
    from kbframework.embedded import pg_url, redis_url_for

    cfg = get_config()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(KB_DATA_DIR=str(cfg.data_dir), DATABASE_URL=cfg.database_url or pg_url(cfg),
               REDIS_URL=cfg.redis_url or redis_url_for(cfg), KB_LOG_LEVEL="WARNING")
    env.update({k: str(v) for k, v in extra.items()})
    return env


@contextmanager
def web_processes(n: int = 1, threads: int = 4, workers: int = 1, **env_extra):
    """Start ``n`` independent gunicorn servers; yields their base URLs."""
    procs, urls = [], []
    env = service_env(**env_extra)
    log = tempfile.TemporaryFile()  # never a pipe: a chatty server would block on a full one
    try:
        for _ in range(n):
            port = free_port()
            p = subprocess.Popen([str(GUNICORN), "-w", str(workers), "--threads", str(threads), "-b",
                                  f"127.0.0.1:{port}", "--timeout", "60", "--log-level", "warning",
                                  "kbframework.wsgi:app"], cwd=str(ROOT), env=env,
                                 stdout=subprocess.DEVNULL, stderr=log)
            procs.append(p)
            urls.append(f"http://127.0.0.1:{port}")
        deadline = time.time() + 60
        for p, url in zip(procs, urls):
            while True:
                if p.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"gunicorn exited: {log.read().decode(errors='replace')[-2000:]}")
                try:
                    with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.time() > deadline:
                    raise RuntimeError("gunicorn did not start in 60 s")
                time.sleep(0.1)
        yield urls
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()


def call(url: str, method: str = "POST", body=None, headers=None, source_ip: str = "127.0.0.1",
         timeout: float = 30):
    """One HTTP request from ``source_ip`` (any 127.x.y.z works on Linux loopback).
    Returns (status, headers dict (lower-case names), parsed JSON or text)."""
    from urllib.parse import urlsplit

    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout, source_address=(source_ip, 0))
    data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
    h = {"Content-Type": "application/json", **(headers or {})}
    try:
        conn.request(method, u.path + (f"?{u.query}" if u.query else ""), body=data, headers=h)
        r = conn.getresponse()
        raw = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()
    text = raw.decode("utf-8", "replace")
    try:
        return r.status, hdrs, json.loads(text)
    except ValueError:
        return r.status, hdrs, text


PNG_1x1 = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                        "1f15c4890000000d49444154789c63f8cfc0f01f0005000201e2a3d3b0"
                        "0000000049454e44ae426082")


def seed_catalog(org_id: str, image_base: str = "https://img.example") -> dict:
    """A product with an image (and a hostile title), a second product and an article, indexed."""
    from kbframework.orgs.accounts import as_uuid, ensure_source
    from kbframework.db import session_scope
    from kbframework.ingest.pipeline import ingest_documents
    from kbframework.sources.apply import apply_draft
    from kbframework.types import DocumentDraft

    drafts = [
        DocumentDraft(title=XSS_TITLE, type="woo_product", document_role="product", external_id="p1",
                      normalized_content="Red summer dress in light linen. A red dress for warm evenings, "
                                         "sizes XS to XL. Machine washable.",
                      source_url="https://shop.example/product/red-dress",
                      primary_image_url=f"{image_base}/img/red-dress.png",
                      metadata={"price": "39.99", "currency": "EUR", "in_stock": True, "sku": "RD-1"}),
        DocumentDraft(title="Blue Denim Jacket", type="woo_product", document_role="product", external_id="p2",
                      normalized_content="Blue denim jacket with brass buttons. Classic fit.",
                      source_url="https://shop.example/product/denim-jacket",
                      metadata={"price": "79", "currency": "EUR", "in_stock": False}),
        DocumentDraft(title="Shipping and returns", type="wp_page", document_role="support", external_id="a1",
                      normalized_content="We ship dresses within two days. You can return any dress within "
                                         "30 days of delivery for a full refund.",
                      source_url="https://shop.example/shipping"),
    ]
    from sqlalchemy import select

    from kbframework.hooks import registry
    from kbframework.models import Setting

    # a mode whose cards include products (the presets are plugins; "default" is built in)
    presets = registry.presets()
    mode = next((n for n in ("shopping", "search", "default") if n in presets
                 and "product" in (presets[n].card_types or ["product"])), "default")
    ids = {}
    with session_scope() as s:
        s.scalar(select(Setting).where(Setting.organization_id == as_uuid(org_id))).preset = mode
        src = ensure_source(s, as_uuid(org_id), "manual", "Manual knowledge")
        for d in drafts:
            doc, _ = apply_draft(s, src, d)
            ids[d.external_id] = doc.id
    ingest_documents(list(ids.values()))
    return {k: str(v) for k, v in ids.items()}


def make_key(org_id: str, origins: list[str], **kw) -> dict:
    from kbframework.db import session_scope
    from kbframework.orgs.keys import create_key, key_to_dict

    with session_scope() as s:
        return key_to_dict(create_key(s, org_id, origins, **kw))

"""The real test WordPress (``tests/wordpress/``: PHP's server, MariaDB) with the kbframework
Connect plugin, driven as a site owner would drive it, and the platform served over HTTP so
that site can reach it.

Not a fake (WordPress is real here): it sits with the fakes because the companion tests and
``bench/wordpress_companion_bench.py`` both drive the site, and a bench imports no test module.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from html import unescape
from pathlib import Path
from urllib.parse import urlsplit

import requests

ROOT = Path(__file__).resolve().parent.parent
WP_DIR = ROOT / "tests" / "wordpress"


class LivePlatform:
    """The test app over HTTP on a fixed port, so that it can be stopped and started again."""

    def __init__(self, app):
        self.app = app
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.srv = None
        self.start()

    def start(self):
        from werkzeug.serving import make_server

        self.srv = make_server("127.0.0.1", self.port, self.app, threaded=True)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def stop(self):
        if self.srv is not None:
            self.srv.shutdown()
            self.srv.server_close()
            self.srv = None


class CompanionSite:
    """The test WordPress: REST writes with the admin's application password, a logged-in
    wp-admin session for the plugin's forms, and the PHP driver."""

    def __init__(self, state: dict, state_file: str):
        self.state, self.state_file = state, state_file
        self.url = state["base_url"]
        self.rest = requests.Session()
        self.rest.auth = (state["user"], state["app_password"])
        self.admin = None

    def call(self, method, route, **kw):
        r = self.rest.request(method, f"{self.url}/wp-json/wp/v2/{route}", timeout=60, **kw)
        assert r.status_code < 300, f"{method} {route}: {r.status_code} {r.text[:300]}"
        return r.json()

    def driver(self, *args, env=None) -> object:
        r = subprocess.run(["php", str(WP_DIR / "companion_driver.php"), *map(str, args)], capture_output=True,
                           text=True, timeout=300,
                           env={**os.environ, "KBF_WP_URL": self.url, "WP_STATE_FILE": self.state_file, **(env or {})})
        assert r.returncode == 0, f"driver {args}: {r.stdout[-1500:]} {r.stderr[-1500:]}"
        return json.loads(r.stdout[r.stdout.index("{") if r.stdout.lstrip()[:1] == "{" else r.stdout.index("["):])

    def login(self):
        s = requests.Session()
        s.cookies.set("wordpress_test_cookie", "WP Cookie check")
        r = s.post(f"{self.url}/wp-login.php", data={"log": self.state["user"], "pwd": self.state["admin_password"],
                                                   "wp-submit": "Log In", "testcookie": "1",
                                                   "redirect_to": f"{self.url}/wp-admin/"}, timeout=60)
        assert r.status_code == 200 and "/wp-admin/" in r.url, r.text[:500]
        self.admin = s
        return s

    def page(self, path) -> str:
        r = self.admin.get(f"{self.url}/wp-admin/{path}", timeout=60)
        assert r.status_code == 200, r.text[:500]
        return r.text

    def settings(self) -> str:
        return self.page("options-general.php?page=kbframework-connect")

    def submit(self, form_id: str, fields: dict, html: str | None = None) -> requests.Response:
        """Post one of the settings page's forms with its nonce, as the browser would."""
        html = html or self.settings()
        m = re.search(rf'<form[^>]*id="{form_id}"[^>]*>(.*?)</form>', html, re.S)
        assert m, f"no form {form_id}"
        form = m.group(0)
        action = unescape(re.search(r'action="([^"]+)"', form).group(1))
        data = {}
        for tag in re.findall(r"<input[^>]*type=[\"']hidden[\"'][^>]*>", form):
            attrs = dict(re.findall(r"(\w+)=[\"']([^\"']*)[\"']", tag))
            data[unescape(attrs["name"])] = unescape(attrs.get("value", ""))
        data.update(fields)
        return self.admin.post(action, data=data, timeout=120)

    def create(self, base="posts", **fields):
        fields.setdefault("status", "publish")
        return self.call("POST", base, json=fields)

    def update(self, post_id, base="posts", **fields):
        current = self.call("GET", f"{base}/{post_id}", params={"context": "edit"})
        last = time.mktime(time.strptime(current["modified_gmt"], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        wait = last + 1.05 - time.time()  # whole seconds: a change in the same second would be stale
        if wait > 0:
            time.sleep(wait)
        return self.call("POST", f"{base}/{post_id}", json=fields)


def install_from_zip(wp: CompanionSite) -> None:
    """Build the plugin's zip, upload it through wp-admin's "Upload Plugin" form, activate it."""
    out = Path(f"/tmp/kbf-wp-plugin-{urlsplit(wp.url).port}")
    built = subprocess.run([sys.executable, str(ROOT / "scripts" / "build-wp-plugin.py"), str(out)],
                           capture_output=True, text=True, check=True).stdout.strip()
    form = wp.page("plugin-install.php?tab=upload")
    nonce = re.search(r'name="_wpnonce" value="([^"]+)"', form).group(1)
    with open(built, "rb") as f:
        r = wp.admin.post(f"{wp.url}/wp-admin/update.php?action=upload-plugin", timeout=120,
                          data={"_wpnonce": nonce, "_wp_http_referer": "/wp-admin/plugin-install.php?tab=upload",
                                "install-plugin-submit": "Install Now"},
                          files={"pluginzip": ("kbframework-connect.zip", f, "application/zip")})
    assert r.status_code == 200 and "Plugin installed successfully" in r.text, r.text[-2000:]
    activate = unescape(re.search(r'href="([^"]*action=activate[^"]*kbframework-connect[^"]*)"', r.text).group(1))
    r = wp.admin.get(activate if activate.startswith("http") else f"{wp.url}/wp-admin/{activate}", timeout=60)
    assert r.status_code == 200 and "Plugin activated" in r.text, r.text[-1500:]
    assert "Paste your connect code" in r.text  # the activation notice points to the settings page

"""``kbf run``: the web server (gunicorn, threads for streaming) and the job workers with the
scheduler (``kbf worker --processes N``), as child processes; Ctrl-C stops both."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from kbframework.config import get_config


def run_all(host: str | None, port: int | None, workers: int = 2, worker_processes: int = 1) -> None:
    cfg = get_config()
    from kbframework.embedded import ensure_services

    db_url, redis_url = ensure_services(cfg)  # start embedded services once, before the children
    env = dict(os.environ)
    env.setdefault("DATABASE_URL", db_url)
    env.setdefault("REDIS_URL", redis_url)
    bind = f"{host or cfg.host}:{port or cfg.port}"
    bin_dir = os.path.dirname(sys.executable)
    web = subprocess.Popen([os.path.join(bin_dir, "gunicorn"), "--bind", bind, "--workers", str(workers),
                            "--worker-class", "gthread", "--threads", "8", "--timeout", "120",
                            "--access-logfile", "-", "kbframework.wsgi:app"], env=env)
    wrk = subprocess.Popen([os.path.join(bin_dir, "kbf"), "worker", "--with-scheduler",
                            "--processes", str(max(1, worker_processes))], env=env)
    print(f"kbframework is running on http://{bind}/ (admin: http://{bind}/admin/) — Ctrl-C stops it",
          flush=True)

    def stop(*_):
        for p in (web, wrk):
            if p.poll() is None:
                p.terminate()
        for p in (web, wrk):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        sys.exit(0)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while True:
        for p, name in ((web, "web server"), (wrk, "worker")):
            if p.poll() is not None:
                print(f"the {name} exited with code {p.returncode}; stopping", file=sys.stderr)
                stop()
        time.sleep(1)

"""`make bench`: run every benchmark module on scratch embedded services; print and write JSON.

Results go to bench/results/latest.json. Benchmarks never fail the build: they measure.
"""
from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

# every *_bench.py beside this file: core first (the headline figures), the rest
# alphabetically, so a new bench module needs no edit here
MODULES = ["core_bench"] + sorted(p.stem for p in Path(__file__).parent.glob("*_bench.py")
                                  if p.stem != "core_bench")


def main() -> int:
    only = sys.argv[1:] or MODULES
    # KB_BENCH_DATA_DIR keeps the bench's services and data after it (to measure a load again
    # after a change); by default they live in a scratch folder removed at the end
    kept = os.environ.get("KB_BENCH_DATA_DIR")
    data_dir = Path(kept) if kept else Path(tempfile.mkdtemp(prefix="kbf-bench-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    os.environ["KB_DATA_DIR"] = str(data_dir)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    # the fake shop and the WordPress test site listen on loopback: the bench's operator
    # allows it and lets each organization switch it on (as the test suite does)
    os.environ.setdefault("KB_ALLOW_PRIVATE_NETWORK", "127.0.0.0/8,::1/128")
    os.environ.setdefault("KB_TENANT_PRIVATE_NETWORK", "1")
    from kbframework import embedded
    from kbframework.config import get_config
    from kbframework.db import init_engine
    from kbframework.migrate import upgrade
    from kbframework.retrieval import vector_index

    cfg = get_config()
    db_url, redis_url = embedded.ensure_services(cfg)
    init_engine(db_url)
    upgrade()
    vector_index.ensure_all()
    results = {"machine": {"cpus": os.cpu_count()}, "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    try:
        for name in only:
            try:
                mod = importlib.import_module(f"bench.{name}")
            except ModuleNotFoundError:
                continue
            print(f"\n== {name} ==", flush=True)
            t = time.perf_counter()
            try:
                results[name] = mod.run()
            except Exception as exc:
                traceback.print_exc()
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            results[name]["_seconds"] = round(time.perf_counter() - t, 1) if isinstance(results[name], dict) else None
    finally:
        embedded.stop_postgres(cfg)
        embedded.stop_redis(cfg)
        if not kept:
            shutil.rmtree(data_dir, ignore_errors=True)
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    name = os.environ.get("KB_BENCH_RESULTS", "latest.json")
    (out / name).write_text(json.dumps(results, indent=2, default=str))
    print("\n" + json.dumps(results, indent=2, default=str))
    print(f"\nwritten to {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

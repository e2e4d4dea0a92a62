"""The evaluation harness: metrics by hand, `kbf eval retrieval` on a small qrels set loaded into
a scratch organization (and dropped again), `kbf eval temporal` on phrase → range cases."""
import json
import math

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from kbframework.cli.commands import cli as main
from kbframework.db import session_scope
from kbframework.retrieval.evaluation import mrr_at, ndcg_at, recall_at, reference_now, run_retrieval_eval
from kbframework.models import Organization


def test_metrics_by_hand():
    rels = {"a": 2, "b": 1, "c": 2}
    ranked = ["x", "a", "b", "y"]
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    idcg = 2 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert abs(ndcg_at(ranked, rels, 10) - dcg / idcg) < 1e-12
    assert ndcg_at(["a", "c", "b"], rels) == 1.0
    assert recall_at(ranked, rels, 2) == 1 / 3 and recall_at(ranked, rels, 10) == 2 / 3
    assert mrr_at(ranked, rels) == 0.5 and mrr_at(["x"], rels) == 0.0


def test_reference_now_is_the_last_wednesday_afternoon():
    from datetime import datetime, timezone

    ref = reference_now("Europe/Lisbon", before=datetime(2026, 7, 10, 12, tzinfo=timezone.utc))  # a Friday
    assert ref.isoformat() == "2026-07-08T14:00:00+00:00"  # Wednesday 15:00 WEST


CORPUS = [
    {"_id": "p1", "title": "Altair Trailhead 2 Tent", "role": "product", "type": "woo_product",
     "text": "Altair Trailhead 2 Tent\nA two-person backpacking tent with two doors.\nPrice: €349.00\nSKU: ALT-TH2",
     "metadata": {"price": 349.0, "currency": "EUR", "sku": "ALT-TH2", "categories": ["Camping > Tents"],
                  "tags": ["2-person"], "stock_status": "instock", "url": "https://shop.example/p1"}},
    {"_id": "p2", "title": "Trailhead 2 Footprint", "role": "product", "type": "woo_product",
     "text": "Trailhead 2 Footprint\nA groundsheet cut to fit the Altair Trailhead 2 tent.\nPrice: €39.00",
     "metadata": {"price": 39.0, "currency": "EUR", "categories": ["Camping > Tent accessories"],
                  "stock_status": "outofstock"}},
    {"_id": "p3", "title": "Kessel Moka Pot", "role": "product", "type": "woo_product",
     "text": "Kessel Moka Pot\nA six-cup stovetop espresso maker in aluminium.\nPrice: €45.00",
     "metadata": {"price": 45.0, "currency": "EUR", "categories": ["Kitchen > Coffee & tea"], "stock_status": "instock"}},
    {"_id": "e1", "title": "Fado Night at Tasca", "role": "event", "type": "event",
     "text": "Fado Night at Tasca\nTasca do Fado Velho, Porto Calmo. Fado. Traditional fado singers by candlelight.",
     "metadata": {"venue": "Tasca do Fado Velho", "city": "Porto Calmo", "genre": "fado", "price": 15},
     "start_offset_days": 3, "start_local_time": "21:00", "duration_minutes": 180, "timezone": "Europe/Lisbon"},
    {"_id": "e2", "title": "Fado Classics", "role": "event", "type": "event",
     "text": "Fado Classics\nTasca do Fado Velho, Porto Calmo. Fado. The great fado songs of the sixties.",
     "metadata": {"venue": "Tasca do Fado Velho", "city": "Porto Calmo", "genre": "fado", "price": 12},
     "start_offset_days": 8, "start_local_time": "21:00", "duration_minutes": 180, "timezone": "Europe/Lisbon"},
    {"_id": "e3", "title": "Past Fado", "role": "event", "type": "event",
     "text": "Past Fado\nTasca do Fado Velho, Porto Calmo. Fado. An evening of fado that already happened.",
     "metadata": {"venue": "Tasca do Fado Velho", "city": "Porto Calmo", "genre": "fado", "price": 10},
     "start_offset_days": -3, "start_local_time": "21:00", "duration_minutes": 120, "timezone": "Europe/Lisbon"},
    {"_id": "s1", "title": "Returns", "role": "support", "type": "wp_page",
     "text": "Returns\nYou can return unused items within 30 days for a refund.", "metadata": {"site": "shop"}},
]
QUERIES = [
    {"_id": "q1", "text": "Altair Trailhead 2 Tent", "kind": "keyword"},
    {"_id": "q2", "text": "ALT-TH2", "kind": "sku"},
    {"_id": "q3", "text": "how many days do I have to send something back?", "kind": "support"},
    {"_id": "q4", "text": "fado this weekend", "kind": "event_time", "expected_time_phrase": "this weekend",
     "expected_in_window": ["e1"]},
    {"_id": "q5", "text": "do you sell electric bikes?", "kind": "no_answer"},
]
QRELS = [("q1", "p1", 2), ("q1", "p2", 1), ("q2", "p1", 2), ("q3", "s1", 2), ("q4", "e1", 2), ("q4", "e2", 2)]


@pytest.fixture
def dataset(tmp_path):
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in CORPUS))
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in QUERIES))
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" +
                                        "\n".join(f"{q}\t{d}\t{g}" for q, d, g in QRELS))
    return tmp_path


def test_eval_retrieval_scores_each_method_in_a_scratch_org(kb_clean, dataset):
    rep = run_retrieval_eval(dataset, log=lambda m: None)
    assert set(rep["methods"]) == {"vector", "keyword", "soft", "hybrid"} and rep["judged_queries"] == 4
    for m in rep["methods"].values():
        for k in ("ndcg@10", "recall@10", "recall@50", "mrr@10"):
            assert 0.0 <= m[k] <= 1.0
    assert rep["per_query"]["keyword"]["q2"] == 1.0 and rep["per_query"]["hybrid"]["q1"] > 0.9
    # the weekend filter keeps Saturday's fado (in the window) and drops next week's
    tw = rep["time_window"]
    assert tw["phrase_found"] == 1 and tw["out_of_window_events_in_top10"] == 0
    assert rep["per_query"]["hybrid"]["q4"] == 1.0
    assert rep["no_answer"]["queries"] == 1
    with session_scope() as s:  # the scratch organization is gone again
        assert s.scalar(select(func.count()).select_from(Organization)) == 0


def test_kbf_eval_retrieval_cli(kb_clean, dataset):
    r = CliRunner().invoke(main, ["eval", "retrieval", "--dataset", str(dataset), "--method", "keyword", "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output[r.output.index("{"):])
    assert list(rep["methods"]) == ["keyword"]
    r = CliRunner().invoke(main, ["eval", "retrieval", "--dataset", str(dataset), "--no-filters"])
    assert r.exit_code == 0 and "nDCG@10" in r.output and "hybrid" in r.output and "filters off" in r.output
    (dataset / "qrels.tsv").unlink()
    r = CliRunner().invoke(main, ["eval", "retrieval", "--dataset", str(dataset)])
    assert r.exit_code == 2 and "missing qrels.tsv" in r.output


def test_kbf_eval_temporal(tmp_path):
    cases = [
        {"query": "techno this weekend", "now": "2026-03-25T15:00:00+01:00", "timezone": "Europe/Belgrade",
         "expect_start": "2026-03-28T05:00:00+01:00", "expect_end": "2026-03-30T05:00:00+02:00"},
        {"query": "24 pack of beer", "now": "2026-03-25T15:00:00+01:00", "timezone": "Europe/Belgrade",
         "expect_start": None, "expect_end": None},
        {"query": "tomorrow", "now": "2026-03-25T15:00:00+01:00", "timezone": "Europe/Belgrade",
         "expect_start": "2026-03-27T05:00:00+01:00", "expect_end": "2026-03-28T05:00:00+01:00"},
    ]
    f = tmp_path / "cases.json"
    f.write_text(json.dumps(cases[:2]))
    r = CliRunner().invoke(main, ["eval", "temporal", "--cases", str(f)])
    assert r.exit_code == 0 and "2 of 2 cases pass" in r.output
    f.write_text(json.dumps(cases))
    r = CliRunner().invoke(main, ["eval", "temporal", "--cases", str(f)])
    assert r.exit_code == 1 and "FAIL 'tomorrow'" in r.output and "2 of 3 cases pass" in r.output
    f.write_text("{not json")
    r = CliRunner().invoke(main, ["eval", "temporal", "--cases", str(f)])
    assert r.exit_code == 2 and r.output.startswith("error:") and "not JSON" in r.output

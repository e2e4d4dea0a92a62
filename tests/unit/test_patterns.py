"""Patterns compiled on first use behave as ``re.compile`` would, and only compile when used."""
import re
import subprocess
import sys

from kbframework.retrieval.patterns import OnUse, compile_on_use


def test_a_pattern_compiles_only_when_first_used_and_then_matches_as_re_does():
    p = compile_on_use(r"\b(?P<w>tonight|tomorrow)\b", re.I)
    assert p._compiled is None and p.pattern.startswith(r"\b") and p.flags == re.I  # readable, not compiled
    q = "Parties TONIGHT or tomorrow?"
    assert p.search(q).group("w") == "TONIGHT"
    assert p._compiled is not None
    ref = re.compile(p.pattern, re.I)
    assert [m.span() for m in p.finditer(q)] == [m.span() for m in ref.finditer(q)]
    assert p.sub("X", q) == ref.sub("X", q) and p.groupindex == ref.groupindex


def test_a_pattern_built_from_others_reads_their_text_without_compiling_them():
    a, b = compile_on_use("cheap(?:er)?"), compile_on_use("first|second")
    both = compile_on_use(a.pattern + "|" + b.pattern)
    assert both.fullmatch("second") and a._compiled is None and b._compiled is None


PROBE = """
from datetime import datetime
from kbframework.retrieval import conversation, phrases, temporal
from kbframework.retrieval.patterns import OnUse
tables = [v for mod in (temporal, conversation, phrases) for v in vars(mod).values() if isinstance(v, OnUse)]
print(len(tables), sum(v._compiled is not None for v in tables))
plain, now = "What is the return policy?", datetime(2026, 4, 24, 12)
temporal.parse_temporal(plain, now), phrases.find_prices(plain), phrases.find_free(plain)
print(temporal._R_TODAY._compiled is not None, phrases._R_RANGE._compiled is not None,
      phrases._R_FREE._compiled is not None)
temporal.parse_temporal("anything on tonight?", now)
print(temporal._R_TODAY._compiled is not None,
      [f.value for f in phrases.find_prices("between 20 and 40 euros")], phrases.find_free("free entry?")[0].value)
"""


def test_the_rule_tables_compile_nothing_at_import_and_only_the_rules_a_question_needs():
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    lines = r.stdout.splitlines()
    tables, compiled = map(int, lines[0].split())
    assert tables > 55 and compiled == 0, r.stdout + r.stderr
    assert lines[1] == "False False False"  # no time, price or "free" word: none of those rules compiled
    assert lines[2] == "True [20.0, 40.0, 'EUR'] 0.0"

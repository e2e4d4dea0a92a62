"""The usage page: a month of tokens and cost, drawn as a bar chart."""
from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

from flask import g, render_template, request
from flask_login import login_required

from kbframework.db import session_scope
from kbframework.orgs.budget import usage_summary
from kbframework.admin.views.base import bp, org


def bar_chart(days: list[dict], width: int = 960, height: int = 220) -> dict:
    """Geometry for a per-day SVG bar chart (tokens in and out stacked)."""
    n = max(1, len(days))
    top = max([d["tokens_in"] + d["tokens_out"] for d in days] + [1])
    pad_l, pad_b, pad_t = 44, 22, 10
    plot_w, plot_h = width - pad_l - 6, height - pad_b - pad_t
    slot = plot_w / n
    bw = max(2.0, slot * 0.7)
    bars = []
    for i, d in enumerate(days):
        x = pad_l + i * slot + (slot - bw) / 2
        h_in = plot_h * d["tokens_in"] / top
        h_out = plot_h * d["tokens_out"] / top
        bars.append({"x": round(x, 1), "w": round(bw, 1), "y_in": round(pad_t + plot_h - h_in, 1),
                     "h_in": round(h_in, 1), "y_out": round(pad_t + plot_h - h_in - h_out, 1),
                     "h_out": round(h_out, 1), "day": d["day"], "label": d["day"][8:10],
                     "show_label": n <= 16 or i % 3 == 0 or i == n - 1, "lx": round(x + bw / 2, 1), **d})
    ticks = [{"y": round(pad_t + plot_h - plot_h * f, 1), "v": int(top * f)} for f in (0, 0.5, 1)]
    return {"w": width, "h": height, "bars": bars, "ticks": ticks, "base": pad_t + plot_h, "left": pad_l,
            "label_y": height - 6}


@bp.get("/usage")
@login_required
def usage():
    month = request.args.get("month") or None
    with session_scope() as s:
        u = usage_summary(s, org(), month)
    y, m = (int(x) for x in u["month"].split("-"))
    prev = f"{y - (m == 1):04d}-{(m - 2) % 12 + 1:02d}"
    nxt = f"{y + (m == 12):04d}-{m % 12 + 1:02d}"
    this = datetime.now(ZoneInfo(g.org_tz)).strftime("%Y-%m")
    from flask_login import current_user

    from kbframework import settings as declared
    from kbframework.admin.views.settings import BUDGET_FIELDS, field_info

    with session_scope() as s:
        values = declared.current(s, org())
    return render_template("admin_usage.html", u=u, chart=bar_chart(u["days"]), prev=prev,
                           next=nxt if nxt <= this else None,
                           month_label=date(y, m, 1).strftime("%B %Y"),
                           budget_fields=[field_info(declared.BY_NAME[n]) for n in BUDGET_FIELDS],
                           budget_values={n: values[n] for n in BUDGET_FIELDS},
                           org_slug=current_user.organization_slug)

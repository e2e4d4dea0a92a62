"""The planner's JSON reply, validated (its own module: marshmallow loads only when the
planner first runs, not whenever the plugins are registered)."""
from __future__ import annotations

from marshmallow import EXCLUDE, Schema, fields, validate


class PlanSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    price_min = fields.Float(allow_none=True, validate=validate.Range(min=0, max=10_000_000))
    price_max = fields.Float(allow_none=True, validate=validate.Range(min=0, max=10_000_000))
    currency = fields.String(allow_none=True, validate=validate.Length(max=8))
    categories = fields.List(fields.String(validate=validate.Length(max=200)), allow_none=True,
                             validate=validate.Length(max=10))
    tags = fields.List(fields.String(validate=validate.Length(max=200)), allow_none=True,
                       validate=validate.Length(max=10))
    in_stock = fields.Boolean(allow_none=True)
    city = fields.String(allow_none=True, validate=validate.Length(max=200))
    venue = fields.String(allow_none=True, validate=validate.Length(max=200))

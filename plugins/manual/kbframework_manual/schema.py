"""What an admin sends for a manual note, validated with marshmallow."""
from marshmallow import Schema, ValidationError, fields, validate, validates

ROLES = ("product", "event", "article", "support", "manual")


class ManualInput(Schema):
    title = fields.String(required=True, validate=validate.Length(min=1, max=300))
    body = fields.String(required=True, validate=validate.Length(min=1, max=500_000))
    tags = fields.List(fields.String(validate=validate.Length(min=1, max=60)), load_default=list,
                       validate=validate.Length(max=30))
    role = fields.String(load_default="manual", validate=validate.OneOf(ROLES))
    expires_at = fields.AwareDateTime(load_default=None, allow_none=True, default_timezone=None)
    event_start = fields.AwareDateTime(load_default=None, allow_none=True)
    event_end = fields.AwareDateTime(load_default=None, allow_none=True)
    venue = fields.String(load_default=None, allow_none=True)
    city = fields.String(load_default=None, allow_none=True)
    source_url = fields.Url(load_default=None, allow_none=True, schemes={"http", "https"})
    image_url = fields.Url(load_default=None, allow_none=True, schemes={"http", "https"})
    metadata = fields.Dict(load_default=dict)

    @validates("body")
    def _not_blank(self, value, **_):
        if not value.strip():
            raise ValidationError("The body is empty.")


class ManualConfig(Schema):
    """The manual source has no settings."""

"""What an admin types when adding an iCalendar feed, validated with marshmallow."""
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from marshmallow import Schema, ValidationError, fields, validate, validates


class IcsConfig(Schema):
    url = fields.Url(required=True, schemes={"http", "https", "webcal"}, require_tld=False,
                     metadata={"description": "Address of the .ics feed (webcal:// is read over https)"})
    venue = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=200),
                          metadata={"description": "Venue for events without a LOCATION"})
    city = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=200),
                         metadata={"description": "City of every event (default: the last part of LOCATION)"})
    weeks_ahead = fields.Integer(load_default=12, validate=validate.Range(min=1, max=104),
                                 metadata={"description": "Recurring events are expanded this many weeks ahead"})
    keep_past_days = fields.Integer(load_default=7, validate=validate.Range(min=0, max=3650),
                                    metadata={"description": "Events that ended longer ago are left out"})
    timezone = fields.String(load_default=None, allow_none=True,
                             metadata={"description": "Zone of floating times (default: the feed's "
                                                      "X-WR-TIMEZONE, else the organization's)"})

    @validates("timezone")
    def _zone(self, value, **_):
        if value:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValidationError(f"Unknown time zone '{value}' (use an IANA name such as Europe/Belgrade).")

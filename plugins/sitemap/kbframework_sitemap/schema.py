"""The sitemap source's configuration, validated with marshmallow."""
from __future__ import annotations

from marshmallow import Schema, ValidationError, fields, validate, validates, validates_schema

from kbframework import DOCUMENT_ROLES
from kbframework_sitemap.sitemap import SitemapError, compile_patterns


class RoleRule(Schema):
    pattern = fields.String(required=True, validate=validate.Length(min=1, max=500),
                            metadata={"description": "glob on the whole URL, or re:<regex>"})
    role = fields.String(required=True, validate=validate.OneOf(DOCUMENT_ROLES))

    @validates("pattern")
    def _pattern(self, value, **_):
        try:
            compile_patterns([value])
        except SitemapError as exc:
            raise ValidationError(str(exc))


def _patterns(value):
    try:
        compile_patterns(value)
    except SitemapError as exc:
        raise ValidationError(str(exc))


class SitemapConfig(Schema):
    sitemap_urls = fields.List(
        fields.Url(schemes={"http", "https"}, require_tld=False), required=True,
        validate=validate.Length(min=1, max=50),
        metadata={"description": "sitemap index or url set URLs (.xml or .xml.gz), e.g. "
                                 "https://example.com/post-sitemap.xml"})
    include_patterns = fields.List(fields.String(validate=validate.Length(max=500)), load_default=list,
                                   validate=_patterns,
                                   metadata={"description": "only these URLs (glob on the whole URL, or re:<regex>)"})
    exclude_patterns = fields.List(fields.String(validate=validate.Length(max=500)), load_default=list,
                                   validate=_patterns,
                                   metadata={"description": "never these URLs (wins over include)"})
    role = fields.String(load_default="article", validate=validate.OneOf(DOCUMENT_ROLES),
                         metadata={"description": "document_role of the pages"})
    role_rules = fields.List(fields.Nested(RoleRule), load_default=list, validate=validate.Length(max=50),
                             metadata={"description": "[{pattern, role}]: first match wins over 'role'"})
    doc_type = fields.String(load_default="web_page", validate=validate.Regexp(r"^[a-z0-9_-]{1,40}$"),
                             metadata={"description": "documents.type of the pages"})
    concurrency = fields.Integer(load_default=4, validate=validate.Range(1, 16),
                                 metadata={"description": "pages fetched at the same time"})
    timeout_seconds = fields.Integer(load_default=15, validate=validate.Range(2, 120),
                                     metadata={"description": "per request"})
    max_page_bytes = fields.Integer(load_default=3_000_000, validate=validate.Range(10_000, 50_000_000),
                                    metadata={"description": "larger pages are skipped"})
    max_pages = fields.Integer(load_default=2000, validate=validate.Range(1, 200_000),
                               metadata={"description": "pages fetched per sync at most"})
    max_sitemaps = fields.Integer(load_default=200, validate=validate.Range(1, 5000),
                                  metadata={"description": "sitemap files read per sync at most"})
    sync_interval_minutes = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(5, 10080))

    @validates_schema
    def _dupes(self, data, **_):
        urls = data.get("sitemap_urls") or []
        if len(set(urls)) != len(urls):
            raise ValidationError("A sitemap URL is listed twice.", "sitemap_urls")

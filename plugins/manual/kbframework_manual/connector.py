"""The manual source type: notes the admin writes; nothing to fetch, everything to validate."""
from __future__ import annotations

import re

import bleach
from marshmallow import ValidationError

from kbframework import ValidationFailed
from kbframework import DocumentDraft, NothingToFetch
from kbframework_manual.schema import ManualConfig, ManualInput


def clean_markdown(body: str) -> str:
    """Basic cleanup only, since a manual entry is saved as the admin wrote it: no HTML tags,
    normalized line ends, no trailing spaces, at most one blank line in a row."""
    text = bleach.clean(body.replace("\r\n", "\n"), tags=[], strip=True)
    text = text.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


class ManualConnector(NothingToFetch):
    name = "manual"
    label = "Manual knowledge"
    config_schema = ManualConfig
    input_schema = ManualInput
    edited_in_admin = True

    def draft_from_input(self, data: dict) -> DocumentDraft:
        try:
            v = ManualInput().load(data or {})
        except ValidationError as exc:
            raise ValidationFailed("The note is not valid.", details=exc.messages)
        tags = sorted({t.strip().lower() for t in v["tags"] if t.strip()})
        role = v["role"]
        return DocumentDraft(title=v["title"].strip(), normalized_content=clean_markdown(v["body"]),
                             raw_content=v["body"], type="manual", document_role=role, tags=tags,
                             expires_at=v["expires_at"], event_start=v["event_start"],
                             event_end=v["event_end"], venue=v["venue"], city=v["city"],
                             source_url=v["source_url"], primary_image_url=v["image_url"],
                             metadata=v["metadata"])

    def normalize(self, record, config, ctx):
        return self.draft_from_input(record.payload)

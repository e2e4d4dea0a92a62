"""Organizations, users, memberships and server-side sessions."""
from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import func, select, update

from kbframework.errors import KBError, NotFound, ValidationFailed
from kbframework.models import Membership, Organization, Setting, Source, User, UserSession
from kbframework.security import hash_password, new_token, token_hash, verify_password

EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:60] or "org"


def check_timezone(tz: str) -> str:
    if not isinstance(tz, str) or not tz or len(tz) > 64:  # IANA names are short; a long one is no file name
        raise ValidationFailed(f"Unknown time zone '{str(tz)[:40]}'. Use an IANA name such as Europe/Belgrade.")
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValidationFailed(f"Unknown time zone '{tz}'. Use an IANA name such as Europe/Belgrade.")
    return tz


def create_org(s, name: str, timezone_name: str = "UTC", slug: str | None = None) -> Organization:
    if not name or not name.strip():
        raise ValidationFailed("An organization needs a name.")
    check_timezone(timezone_name)
    slug = slug or slugify(name)
    if s.scalar(select(Organization).where(Organization.slug == slug)):
        raise KBError(f"An organization with slug '{slug}' already exists.", code="conflict", status=409)
    org = Organization(name=name.strip(), slug=slug, timezone=timezone_name)
    s.add(org)
    s.flush()
    s.add(Setting(organization_id=org.id))
    s.flush()
    return org


def get_org_by_slug(s, slug: str) -> Organization:
    org = s.scalar(select(Organization).where(Organization.slug == slug))
    if not org:
        raise NotFound(f"No organization with slug '{slug}'.")
    return org


def org_timezone(s, org_id) -> str:
    """The organization's IANA time zone; UTC when the organization is gone."""
    org = s.get(Organization, as_uuid(org_id))
    return org.timezone if org else "UTC"


def create_user(s, email: str, password: str, org: Organization, role: str = "admin",
                name: str | None = None) -> User:
    email = (email or "").strip().lower()
    if not EMAIL_RE.match(email):
        raise ValidationFailed(f"'{email}' is not an e-mail address.")
    if role not in ("admin", "member"):
        raise ValidationFailed("Role must be admin or member.")
    if len(password or "") < 10:
        raise ValidationFailed("Passwords need at least 10 characters.")
    user = s.scalar(select(User).where(func.lower(User.email) == email))
    if user is None:
        user = User(email=email, name=name, password_hash=hash_password(password))
        s.add(user)
        s.flush()
    else:
        user.password_hash = hash_password(password)
    m = s.scalar(select(Membership).where(Membership.user_id == user.id,
                                          Membership.organization_id == org.id))
    if m is None:
        s.add(Membership(user_id=user.id, organization_id=org.id, role=role))
    else:
        m.role = role
    s.flush()
    return user


def authenticate(s, email: str, password: str) -> User | None:
    user = s.scalar(select(User).where(func.lower(User.email) == (email or "").strip().lower()))
    if user is None or not user.is_active:
        verify_password("$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$ZmFrZWZha2VmYWtlZmFrZQ", password or "")
        return None
    return user if verify_password(user.password_hash, password or "") else None


def memberships(s, user_id) -> list[Membership]:
    return list(s.scalars(select(Membership).where(Membership.user_id == user_id)
                          .order_by(Membership.created_at)))


def start_session(s, user: User, org_id, days: int, ip: str | None, ua: str | None) -> str:
    token = new_token()
    s.add(UserSession(user_id=user.id, organization_id=org_id, token_hash=token_hash(token),
                      expires_at=datetime.now(timezone.utc) + timedelta(days=days), ip=ip,
                      user_agent=(ua or "")[:300]))
    user.last_login_at = datetime.now(timezone.utc)
    return token


def load_session(s, token: str) -> UserSession | None:
    if not token:
        return None
    row = s.scalar(select(UserSession).where(UserSession.token_hash == token_hash(token)))
    now = datetime.now(timezone.utc)
    if row is None or row.revoked_at is not None or row.expires_at <= now:
        return None
    if (now - row.last_seen_at).total_seconds() > 60:
        row.last_seen_at = now
    return row


def revoke_session(s, token: str) -> None:
    s.execute(update(UserSession).where(UserSession.token_hash == token_hash(token))
              .values(revoked_at=datetime.now(timezone.utc)))


def ensure_source(s, org_id, type_: str, name: str) -> Source:
    """The per-organization source that owns documents without a remote origin."""
    src = s.scalar(select(Source).where(Source.organization_id == org_id, Source.type == type_)
                   .order_by(Source.created_at))
    if src is None:
        src = Source(organization_id=org_id, type=type_, name=name, status="active", config={})
        s.add(src)
        s.flush()
    return src


def as_uuid(value) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError):
        raise NotFound("Not found.")

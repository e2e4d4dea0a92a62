"""The admin pages: server-rendered Jinja, forms that post back with a CSRF field, and a
little JavaScript (admin.js) for the test chat, the markdown preview and copy buttons.

One blueprint (``admin``, in ``base``) and one module per area; importing this package
registers every page. Every page needs a login and only ever sees the caller's
organization: lookups go through the organization-scoped service functions (documents,
sources, keys, feedback), so another organization's id is a 404. Members read everything;
every write needs the admin role.
"""
from kbframework.admin.views import (chat, conversations, dashboard, documents, feedback, keys,  # noqa: F401
                                     knowledge, readable, settings, sources, usage)
from kbframework.admin.views.base import bp  # noqa: F401

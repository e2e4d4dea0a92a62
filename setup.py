"""Only the package list lives here: pyproject.toml cannot combine package discovery with
folders mapped into the package (admin/ → kbframework.admin, widget/ → kbframework.widget).
Namespace discovery, as pyproject's ``packages.find`` did, so kbframework.migrations ships; the
admin's templates and static folders are listed as the data packages setuptools takes them for."""
from setuptools import find_namespace_packages, setup

setup(packages=find_namespace_packages(include=["kbframework*"])
      + ["kbframework.admin", "kbframework.admin.views", "kbframework.admin.templates",
         "kbframework.admin.static", "kbframework.widget"])

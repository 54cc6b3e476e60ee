"""The platform's ``a2a`` app.

Its name is also the top-level package of the official ``a2a-sdk`` (``a2a.types``,
``a2a.server``, ``a2a.client``, ...). Extending ``__path__`` makes both importable: our
modules first, then the SDK's sub-packages. So never add a module here named like an SDK
sub-package (``types``, ``server``, ``client``, ``utils``, ``helpers``, ``compat``, ``auth``,
``extensions``, ``_base``): it would hide the SDK's.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

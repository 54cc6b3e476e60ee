"""``manage.py rotatecredentials``: re-encrypt every stored agent credential under the first
``CREDENTIALS_KEY``.

The key's rotation (docs/registry.md, Credentials): put the new key first
(``CREDENTIALS_KEY=new,old``), run this, then drop ``old``. A credential is write-only, so
"re-save it" asked the operator for every agent's secret; this reads each one with any of
the keys and writes it encrypted under the first (Fernet's ``MultiFernet.rotate``: the
secret is never shown, logged or decrypted into anything but the new token).

A credential none of the keys reads (the key it was written under is not listed) is
left as it is and named (never quoted): the command then ends with an error, so a
script does not go on to drop the old key. Run it again once that key is listed, or set
that agent's credential again.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agent_profiles.credentials import CredentialsUnreadable, reencrypt
from agent_profiles.models import AgentProfile


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored agent credential under the first CREDENTIALS_KEY (after "
        "CREDENTIALS_KEY=new,old; drop the old key once this succeeds). Fails, naming the "
        "agents, when a credential cannot be read with any of the keys (those are left as "
        "they are)."
    )

    def handle(self, *args: Any, **opts: Any) -> None:
        rows = (
            AgentProfile.objects.exclude(auth_encrypted="")
            .order_by("pk")
            .values_list("pk", "auth_encrypted")
        )
        rotated, changed, unreadable = 0, 0, []
        for pk, token in rows.iterator():
            try:
                fresh = reencrypt(token)
            except CredentialsUnreadable:
                unreadable.append(pk)
                continue
            # An update, not a save: the credential is the same, so it is no credential
            # change for dispatch (a2a.follow_policy watches saves). Conditional on the
            # token read: one an operator set meanwhile (under the first key) stays.
            if AgentProfile.objects.filter(pk=pk, auth_encrypted=token).update(
                auth_encrypted=fresh
            ):
                rotated += 1
            else:
                changed += 1
        self.stdout.write(f"Re-encrypted {rotated} credential(s) under the first CREDENTIALS_KEY.")
        if changed:
            self.stdout.write(f"{changed} credential(s) were set anew meanwhile: left as set.")
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} credential(s) cannot be decrypted with any CREDENTIALS_KEY "
                f"and were left as they are: agent(s) {', '.join(unreadable)}. List the key "
                "they were written under in CREDENTIALS_KEY and run this again, or set their "
                "credential again; do not drop the old key before."
            )

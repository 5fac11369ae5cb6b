"""The secret policy on import lines: a record is refused exactly where the API that writes it
refuses it, with the same detector and the same 422 `SECRET_REFUSED`.

- memories: the fields a memory write checks, and a keyed memory's key; their history
  (`memory_event`) holds only text and changes that passed the same policy when written;
- threads: the title and metadata, as creating or updating a thread checks them; messages:
  their author's name and metadata, as appending them checks them;
- the profile document and the account overlay: the stricter rule of the documents replayed
  into every prompt (a credential-named key is refused whatever it holds);
- audit records: their `detail`. The API writes there only values that passed this policy
  (profile and account values before and after a change) and what the service itself says
  (counts, ids, the kind of a failure, never content), so a detail holding a secret is one no
  export of the service holds;
- a message's content and `tool_calls`, and thread summaries, are not refused: the API
  stores them as sent (they are the user's record) and masks detected secrets wherever they
  are replayed into a prompt, and an imported message is replayed through the same masking.
  Refusing them here would make an export of what the API accepted impossible to import.

One refused line refuses the whole import, as any other bad line does: nothing is stored.
"""

from __future__ import annotations

from typing import Any

from service.kit.secrets import refuse_secrets
from service.memories.recording import MEMORY_SECRET_FIELDS
from service.threads.service import MESSAGE_SECRET_FIELDS, THREAD_SECRET_FIELDS

_OVERLAY_FIELDS = ("name", "email", "avatar", "socials")

# Record type → (the columns the policy reads, whether a credential-named key is refused
# whatever it holds).
_CHECKED: dict[str, tuple[tuple[str, ...], bool]] = {
    "memory": ((*MEMORY_SECRET_FIELDS, "store_key"), False),
    "memory_event": (("old_text", "new_text", "changes"), False),
    "thread": (THREAD_SECRET_FIELDS, False),
    "message": (MESSAGE_SECRET_FIELDS, False),
    "profile": (("document",), True),
    "user_account": (_OVERLAY_FIELDS, True),
    "audit_log": (("detail",), False),
}


def refuse_record_secrets(line: int, kind: str, data: dict[str, Any]) -> None:
    """Raise 422 `SECRET_REFUSED` naming `line` if the record holds what the API refuses."""
    columns, any_credential_key = _CHECKED.get(kind, ((), False))
    for column in columns:
        refuse_secrets(
            data.get(column), (kind, column), any_credential_key=any_credential_key, line=line
        )

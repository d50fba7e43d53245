"""Who may upload what: the ACL a caller may give, the namespace an upload writes, and the quotas.

* ``groups`` are split on commas, never trimmed, each a name by the ingest's rule (422 naming ``groups``);
  ``public=true`` needs ``admin``; every group given must be one the caller may grant: its own, or its
  ``may_grant`` (403 naming ``groups``).
* An upload's id is keyed from (tenant, file name), so a tenant re-uploading a name replaces its own
  document and nothing else. A document another uploader wrote, or one from the corpus, is replaced
  only by a caller who could delete it (``admin`` holding one of its groups, as ``DELETE``); one still in
  the worker's hands is not replaced at all (409).
* Per tenant: at most ``uploads.tenant_max_documents`` documents (429) and ``uploads.tenant_max_bytes``
  bytes of files (413), counting what the upload replaces only once. What counts is what the tenant sent,
  uploaded or handed over by the CLI (whose documents keep their corpus ids and roots), by the tenant
  each record keeps.
"""

from __future__ import annotations

from collections.abc import Sequence

from docquery import validation
from docquery.api.auth.authenticator import ROLE_ADMIN
from docquery.api.errors import ApiError
from docquery.config.settings import UploadSettings
from docquery.core.collection import PUBLIC_GROUP
from docquery.core.domain import UNFINISHED_STATES, DocumentRecord, Principal
from docquery.core.ports import DocumentCatalog
from docquery.core.uploads import EXTRA_BYTES, EXTRA_TENANT, EXTRA_UPLOADER, tenant_key, tenant_root


def tenant_of(principal: Principal) -> str:
    """Whose namespace an upload writes: the credential's tenant, else the caller alone."""
    return principal.tenant or principal.id


def may_delete(principal: Principal, record: DocumentRecord) -> bool:
    """``DELETE /v1/documents/{doc_id}``'s rule: an admin, for a document one of its groups can see."""
    acl = principal.acl()
    return (
        ROLE_ADMIN in principal.roles and not acl.allows_nothing and not set(record.acl_groups).isdisjoint(acl.labels)
    )


def may_see(principal: Principal, record: DocumentRecord) -> bool:
    """A document's status is shown to whoever may read it, and to its uploader."""
    if record.extra.get(EXTRA_UPLOADER) == principal.id:
        return True
    acl = principal.acl()
    return not acl.allows_nothing and not set(record.acl_groups).isdisjoint(acl.labels)


def granted_acl(principal: Principal, groups: str | None, public: str | None) -> tuple[str, ...]:
    """The ACL the upload asks for, once the caller may give it; raises ApiError."""
    if public not in (None, "true", "false"):
        raise ApiError(422, "invalid request: public: must be true or false")
    if public == "true":
        if groups is not None:
            raise ApiError(422, "invalid request: groups: give groups or public=true, not both")
        if ROLE_ADMIN not in principal.roles:
            raise ApiError(403, "public=true needs the admin role")
        return (PUBLIC_GROUP,)
    if groups is None:
        raise ApiError(422, "invalid request: groups: required (comma-separated group names), or public=true")
    try:
        acl = validation.upload_groups(groups)
    except validation.InvalidRequest as exc:
        raise ApiError(422, f"invalid request: {exc.field}: {exc.reason}") from None
    allowed = principal.grantable()
    for i, group in enumerate(groups.split(","), start=1):
        if group not in allowed:
            raise ApiError(403, f"groups: group {i} is not one you may grant (your own groups, or may_grant)")
    return acl


def check_replace(principal: Principal, previous: DocumentRecord | None, where: str) -> None:
    """Whether this upload may replace ``previous`` (the record now under its id); raises ApiError."""
    if previous is None:
        return
    if previous.status in UNFINISHED_STATES:
        raise ApiError(409, f"{where}: a document of this name is still being processed; upload it again once it ends")
    if previous.extra.get(EXTRA_UPLOADER) != principal.id and not may_delete(principal, previous):
        raise ApiError(
            403,
            f"{where}: a document of this name belongs to another uploader; only they or an admin "
            "who may delete it can replace it",
        )


def held_by(index: DocumentCatalog, tenant: str) -> list[DocumentRecord]:
    """Every record the tenant sent, either way; an upload recorded before records kept their tenant is found
    by its root."""
    found = {r.doc_id: r for r in index.list_documents(root=tenant_root(tenant))}
    found |= {r.doc_id: r for r in index.list_documents(extra=(EXTRA_TENANT, tenant_key(tenant)))}
    return list(found.values())


def check_quota(cfg: UploadSettings, held: Sequence[DocumentRecord], replacing: set[str], sizes: Sequence[int]) -> None:
    """``held``: the tenant's records (``held_by``); ``replacing``: the ids this request writes over."""
    kept = [r for r in held if r.doc_id not in replacing]
    documents = len(kept) + len(sizes)
    if documents > cfg.tenant_max_documents:
        raise ApiError(
            429,
            f"upload quota: the tenant would hold {documents} documents, more than {cfg.tenant_max_documents}; "
            "delete some first",
        )
    total = sum(_bytes(r) for r in kept) + sum(sizes)
    if total > cfg.tenant_max_bytes:
        raise ApiError(
            413,
            f"upload quota: the tenant would hold {total} bytes of files, more than {cfg.tenant_max_bytes}; "
            "delete some first",
        )


def _bytes(record: DocumentRecord) -> int:
    value = record.extra.get(EXTRA_BYTES, "0")
    return int(value) if value.isdigit() else 0

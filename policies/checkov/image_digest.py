"""CKV_DQ_5: images pinned by digest (a tag can be moved under a running cluster)."""

from __future__ import annotations

from dq_base import DQPodCheck
from dq_podspec import DIGEST_RE, PodTemplate


class ImagePinnedByDigest(DQPodCheck):
    def __init__(self) -> None:
        super().__init__(
            name="Every image is pinned by sha256 digest (base placeholders must be replaced by an overlay)",
            id="CKV_DQ_5",
        )

    def violations(self, pod: PodTemplate) -> list[str]:
        return [
            f"container {c.get('name')}: image {c.get('image')!r} is not pinned by digest"
            for c in pod.containers()
            if not DIGEST_RE.search(str(c.get("image", "")))
        ]


check = ImagePinnedByDigest()

"""Image references and pulls as the simulated kubelet sees them: parsing, the missing-image rule
and the texts upstream's kubelet reports.

- `parse(image)` reads a reference with the grammar of github.com/distribution/reference (what
  kubelet's image manager parses with); an invalid one raises `InvalidImage` with that library's
  error text, which the kubelet reports as InvalidImageName.
- `pull_error(ref)` is the simulator's documented rule (docs/simulator.md, "Images") for images
  that cannot be pulled: a registry under the reserved `.invalid` TLD or `invalid.example`, a tag
  `404` or one containing `doesnotexist`/`does-not-exist`/`nonexistent`, and the mistyped images
  of the Kubernetes docs' examples (`nginx:1.161`, `nginx:sometag`, `kubernetes-bootcamp:v10`).

The pull back-off (per pod and image) is `backoff.Backoff`.

Pure functions, called by `kubelet.py`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

# The pieces of distribution/reference's grammar (reference/regexp.go), as regular expressions.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|{_IPV6})(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?"
)
_IDENTIFIER = re.compile(r"[a-f0-9]{64}")
_NAME_MAX = 255
DEFAULT_DOMAIN = "docker.io"

# The mistyped or unresolvable images of the Kubernetes docs' examples (the Deployment page's
# rollback and proportional scaling, the rolling update tutorial), which fail there as on a real
# cluster; names as normalized by `Reference.full`.
_DOCS_TYPOS = frozenset(
    (
        "docker.io/library/nginx:1.161",
        "docker.io/library/nginx:sometag",
        "gcr.io/google-samples/kubernetes-bootcamp:v10",
    )
)
_MISSING_TAG_WORDS = ("doesnotexist", "does-not-exist", "nonexistent")


class InvalidImage(ValueError):
    """Not a reference by distribution/reference's grammar; str() is that library's error."""


@dataclass(frozen=True)
class Reference:
    domain: str
    path: str
    tag: str
    digest: str

    @property
    def full(self) -> str:
        """The normalized reference, as containerd names it (`docker.io/library/nginx:latest`)."""
        out = f"{self.domain}/{self.path}"
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out


def parse(image: str) -> Reference:
    """The normalized reference (Docker Hub's domain and `library/` added, tag `latest` when there
    is neither tag nor digest), as kubelet's image manager reads it."""
    if _IDENTIFIER.fullmatch(image):
        raise InvalidImage(f"invalid repository name ({image}), cannot specify 64-byte hexadecimal strings")
    domain, remainder = _split_domain(image)
    # The library checks the repository's case before the grammar, on the text before any ':'.
    remote = remainder.split(":", 1)[0]
    if remote.lower() != remote:
        raise InvalidImage(f"invalid reference format: repository name ({remote}) must be lowercase")
    match = _REFERENCE.fullmatch(image)
    if match is None:
        if not image:
            raise InvalidImage("repository name must have at least one component")
        raise InvalidImage("invalid reference format")
    name = match["name"]
    if len(name) > _NAME_MAX:
        raise InvalidImage(f"repository name must not be more than {_NAME_MAX} characters")
    domain, path = _split_domain(name)
    tag = match["tag"] or ("" if match["digest"] else "latest")
    return Reference(domain, path, tag, match["digest"] or "")


def _split_domain(name: str) -> tuple[str, str]:
    """The registry and the rest, Docker Hub's (with `library/` for a one-part name) when the
    first part does not look like a host."""
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost" or first.lower() != first):
        return first, rest
    return DEFAULT_DOMAIN, name if "/" in name else f"library/{name}"


def inspect_failure(image: str, error: InvalidImage) -> str:
    """The message of the InspectFailed Event and of the InvalidImageName waiting state."""
    return f'Failed to apply default image tag "{image}": couldn\'t parse image name "{image}": {error}'


def pull_error(ref: Reference) -> str | None:
    """Why the simulated registry refuses the image (containerd's error text), or None."""
    host = ref.domain.rsplit(":", 1)[0].lower()
    full = ref.full
    if host == "invalid.example" or host.endswith(".invalid"):
        return (
            f'rpc error: code = Unknown desc = failed to pull and unpack image "{full}": failed to '
            f'resolve reference "{full}": failed to do request: Head "https://{ref.domain}/v2/'
            f'{ref.path}/manifests/{ref.tag or ref.digest}": dial tcp: lookup {host}: no such host'
        )
    tag = ref.tag.lower()
    if tag == "404" or any(word in tag for word in _MISSING_TAG_WORDS) or full in _DOCS_TYPOS:
        return (
            f'rpc error: code = NotFound desc = failed to pull and unpack image "{full}": '
            f'failed to resolve reference "{full}": {full}: not found'
        )
    return None


def size_bytes(ref: Reference) -> int:
    """A stable made-up image size (10 to 200 MB) for the Pulled Event."""
    digest = hashlib.sha256(ref.full.encode()).digest()
    return 10_000_000 + int.from_bytes(digest[:4], "big") % 190_000_000


def go_duration(seconds: float) -> str:
    """`seconds` as Go's time.Duration prints it (`512ms`, `1.5s`, `2m3s`), to millisecond precision."""
    ms = max(0, round(seconds * 1000))
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    minutes, rest_ms = divmod(ms, 60_000)
    secs = f"{rest_ms / 1000:.3f}".rstrip("0").rstrip(".") or "0"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def pulls_always(container: dict[str, object], ref: Reference) -> bool:
    """Whether the container's pull policy pulls even an image the node has (the API's default:
    Always for `latest` or no tag, else IfNotPresent); Never is handled by the caller."""
    policy = container.get("imagePullPolicy")
    if policy:
        return policy == "Always"
    return ref.tag == "latest" and not ref.digest

"""Detached JWS signatures of cluster-info, the string kubeadm verifies.

Upstream pkg/controller/bootstrap/jws.go (ComputeDetachedSignature), which kubeadm's discovery
(`DetachedTokenIsValid`) recomputes and compares as strings: the compact JWS serialization with
the payload left out, `<header>..<signature>`, where the header is the protected header
`{"alg":"HS256","kid":"<token id>"}` (go-jose writes its keys sorted, no spaces) and the
signature HMAC-SHA256 with the token secret as key over `<header>.<payload>`, each part
base64url without padding. HMAC from `cryptography`: no JWS library is needed for one fixed
header and algorithm, and an exact string is what must come out.
"""

from __future__ import annotations

import base64
import json

from cryptography.hazmat.primitives import hashes, hmac


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def detached_signature(content: str, token_id: str, token_secret: str) -> str:
    header = _b64url(json.dumps({"alg": "HS256", "kid": token_id}, separators=(",", ":")).encode())
    signing_input = f"{header}.{_b64url(content.encode())}".encode()
    mac = hmac.HMAC(token_secret.encode(), hashes.SHA256())
    mac.update(signing_input)
    return f"{header}..{_b64url(mac.finalize())}"

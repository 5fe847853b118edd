"""A real CPA build with a Devin credential, as a user runs it behind the sidecar.

    client -> sidecar reverse listener -> real CPA --proxy-url--> sidecar regular listener
           -> (server.codeium.com, mapped to a local fake inside mitmdump only) -> fake Devin

CPA v7.3.4 (the Devin bug report's build) cannot be obtained here: the Go module proxy
refuses every CPA module, and the public repository's tags stop at v7.2.140, before Devin.
The nearest source is the unmerged PR #5111 (``refs/pull/5111/head``), built outside this
repository. Its binary is found like every other real CPA (:func:`realcpa.binary`):
``$STREAMFIX_CPA_BIN_DIR/cpa-pr5111``; without it the tests skip with one line saying so.

What this build's Devin executor needs (read from its source, not copied):

- an auth file in ``auth-dir``: ``{"type": "devin", "devin_session_token": "..."}`` (the
  executor adds the ``devin-session-token$`` prefix when missing);
- nothing else: no token check, no model list, no refresh call. Its only call is
  ``POST https://server.codeium.com/exa.api_server_pb.ApiServerService/GetChatMessage``
  (a hard-coded base URL; no per-credential ``base_url``), through the global
  ``proxy-url`` (or the credential's ``proxy_url``);
- its models are the built-in catalog (``glm-5-2``, ``swe-1-7``, ...); the report's
  ``devin/swe-2`` (and the client runners' ``test-model``) is given as an
  ``oauth-model-alias`` of ``swe-1-7``.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path

import realcpa
from realcpa import Cpa

BUILD = "pr5111"
"""The CPA build these tests run: PR #5111's head (98fbaedf9, 2026-08-20)."""
DEVIN_HOST = "server.codeium.com"
MODEL = "devin/swe-2"
"""The model the bug report asks for, an alias of :data:`UPSTREAM_MODEL` in this build."""
UPSTREAM_MODEL = "swe-1-7"
SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


def missing_reason() -> str:
    return (
        realcpa.missing_reason(BUILD) + " (PR #5111's Devin executor: v7.3.4, the report's build, is in no public tag)"
    )


def config(port: int, auth_dir: Path, proxy_url: str) -> str:
    """config.yaml: no provider entries (the Devin credential is a file in auth-dir), the
    sidecar's regular listener as the global proxy, no outbound call of CPA's own."""
    return (
        realcpa.config_head(port, auth_dir, proxy_url)
        + f"""\
oauth-model-alias:
  devin:
    - name: "{UPSTREAM_MODEL}"
      alias: "{MODEL}"
      fork: true
    - name: "{UPSTREAM_MODEL}"
      alias: "{realcpa.MODEL}"
      fork: true
"""
    )


def ca_bundle(mitm_ca: Path, out: Path) -> Path:
    """The system roots plus mitmproxy's CA in one file, for SSL_CERT_FILE (which replaces
    Go's default roots): docs/upstream-leg.md, "TLS trust for CPA"."""
    system = next((Path(p) for p in SYSTEM_BUNDLES if Path(p).is_file()), None)
    out.write_bytes((system.read_bytes() if system else b"") + b"\n" + mitm_ca.read_bytes())
    return out


@dataclass
class DevinCpa(Cpa):
    token: str = ""


def start(proxy_url: str, cert_file: Path, token: str, timeout: float = 30.0) -> DevinCpa:
    """Start the build with one Devin credential; ready on /healthz (see realcpa.start)."""
    exe = realcpa.binary(BUILD)
    if exe is None:
        raise FileNotFoundError(missing_reason())

    def write(d: Path, port: int) -> dict[str, str]:
        (d / "auths" / "devin.json").write_text(json.dumps({"type": "devin", "devin_session_token": token}))
        (d / "config.yaml").write_text(config(port, d / "auths", proxy_url))
        return {"SSL_CERT_FILE": str(cert_file)}

    proc, port, d = realcpa.launch(exe, f"{BUILD}-devin", write, timeout)
    return DevinCpa(BUILD, "devin", proc, port, d, token)


def make_certs(d: Path, host: str = DEVIN_HOST) -> tuple[Path, Path, Path]:
    """A test CA and a certificate for ``host`` (the fake Devin's): (ca, cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "streamfix test CA (fake Devin)")])
    valid = {"not_valid_before": now - datetime.timedelta(days=1), "not_valid_after": now + datetime.timedelta(days=2)}
    ca = (
        x509.CertificateBuilder(subject_name=ca_name, issuer_name=ca_name, public_key=ca_key.public_key(),
                                serial_number=x509.random_serial_number(), **valid)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    cert = (
        x509.CertificateBuilder(subject_name=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]),
                                issuer_name=ca_name, public_key=key.public_key(),
                                serial_number=x509.random_serial_number(), **valid)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    paths = d / "devin-ca.pem", d / "devin.pem", d / "devin.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths
